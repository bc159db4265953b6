import Foundation
import NIOSSL
import PostgresNIO

/// Where a PostgreSQL database is and how to log in, parsed from a
/// `postgres://user:password@host:port/database?sslmode=…` URL.
public struct PostgresLocation: Sendable, Equatable {
    public enum TLSMode: String, Sendable, CaseIterable {
        /// Plain TCP, for loopback and private networks.
        case disable
        /// TLS when the server offers it, plain otherwise (libpq's default).
        case prefer
        /// TLS or no connection.
        case require
    }

    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String
    public var tls: TLSMode
    /// Connections one process opens at most.
    public var maxConnections: Int
    /// Seconds a connection attempt may take before the server counts as unreachable
    /// (libpq's `connect_timeout`).
    public var connectTimeout: Int
    /// Whether statements that run often go as named prepared statements. A pooler in
    /// transaction mode without support for them refuses them, and the store then stops by
    /// itself; false skips that first refusal.
    public var preparedStatements: Bool

    public init(
        host: String, port: Int = 5432, username: String, password: String?, database: String, tls: TLSMode = .prefer,
        maxConnections: Int = 10, connectTimeout: Int = 5, preparedStatements: Bool = true
    ) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.tls = tls
        self.maxConnections = maxConnections
        self.connectTimeout = connectTimeout
        self.preparedStatements = preparedStatements
    }

    /// True for values `--database` should treat as a PostgreSQL URL rather than a SQLite path.
    public static func isURL(_ text: String) -> Bool {
        text.hasPrefix("postgres://") || text.hasPrefix("postgresql://")
    }

    public init(url text: String) throws {
        let usage = "expected postgres://user:password@host:port/database (optionally ?sslmode=disable|prefer|require&pool=N&connect_timeout=SECONDS&prepared_statements=true|false)"
        guard Self.isURL(text), let components = URLComponents(string: text) else {
            throw PostgresStoreError.badLocation("'\(Self.redacted(text))' is not a PostgreSQL URL: \(usage)")
        }
        guard let host = components.host, !host.isEmpty else {
            throw PostgresStoreError.badLocation("the PostgreSQL URL names no host: \(usage)")
        }
        guard let user = components.percentEncodedUser.flatMap({ $0.removingPercentEncoding }), !user.isEmpty else {
            throw PostgresStoreError.badLocation("the PostgreSQL URL names no user: \(usage)")
        }
        // URLComponents takes any number as a port; a socket address keeps 16 bits of it, so
        // 99999 would connect to 34463.
        if let port = components.port, !(1...65_535).contains(port) {
            throw PostgresStoreError.badLocation("the PostgreSQL URL's port \(port) is not a TCP port (1 to 65535): \(usage)")
        }
        if components.port == nil, let authority = text.split(separator: "@").last?.split(separator: "/").first, authority.hasSuffix(":") {
            throw PostgresStoreError.badLocation("the PostgreSQL URL has a ':' but no port after it: \(usage)")
        }
        let database = String(components.path.drop(while: { $0 == "/" })).removingPercentEncoding ?? ""
        guard !database.isEmpty, !database.contains("/") else {
            throw PostgresStoreError.badLocation("the PostgreSQL URL names no database (the path after the port): \(usage)")
        }
        var tls = TLSMode.prefer
        var pool = 10
        var connectTimeout = 5
        var preparedStatements = true
        for item in components.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                guard let value = item.value, let mode = TLSMode(rawValue: value) else {
                    throw PostgresStoreError.badLocation(
                        "sslmode must be one of \(TLSMode.allCases.map(\.rawValue).joined(separator: ", ")) (got '\(item.value ?? "")')")
                }
                tls = mode
            case "pool":
                guard let value = item.value.flatMap(Int.init), (1...200).contains(value) else {
                    throw PostgresStoreError.badLocation("pool must be a number of connections from 1 to 200 (got '\(item.value ?? "")')")
                }
                pool = value
            case "connect_timeout":
                guard let value = item.value.flatMap(Int.init), (1...300).contains(value) else {
                    throw PostgresStoreError.badLocation("connect_timeout must be a number of seconds from 1 to 300 (got '\(item.value ?? "")')")
                }
                connectTimeout = value
            case "prepared_statements":
                guard let value = item.value.flatMap(Bool.init) else {
                    throw PostgresStoreError.badLocation("prepared_statements must be true or false (got '\(item.value ?? "")')")
                }
                preparedStatements = value
            default:
                throw PostgresStoreError.badLocation("unknown PostgreSQL URL parameter '\(item.name)': \(usage)")
            }
        }
        self.init(
            host: host, port: components.port ?? 5432, username: user,
            password: components.percentEncodedPassword?.removingPercentEncoding, database: database, tls: tls, maxConnections: pool,
            connectTimeout: connectTimeout, preparedStatements: preparedStatements)
    }

    /// For messages and logs: never the password.
    public var description: String { "PostgreSQL server \(host):\(port), database \(database), user \(username)" }

    /// The URL with its password replaced, for messages about a URL that did not parse.
    static func redacted(_ text: String) -> String {
        guard let at = text.firstIndex(of: "@"), let scheme = text.range(of: "://"), scheme.upperBound < at,
              let colon = text[scheme.upperBound..<at].firstIndex(of: ":") else { return text }
        return String(text[..<text.index(after: colon)]) + "***" + String(text[at...])
    }

    func connectionConfiguration() throws -> PostgresConnection.Configuration {
        let tlsSetting: PostgresConnection.Configuration.TLS
        switch tls {
        case .disable:
            tlsSetting = .disable
        case .prefer, .require:
            let context: NIOSSLContext
            do {
                context = try NIOSSLContext(configuration: .makeClientConfiguration())
            } catch {
                throw PostgresStoreError.badLocation("cannot set up TLS for \(description): \(error)")
            }
            tlsSetting = tls == .prefer ? .prefer(context) : .require(context)
        }
        var configuration = PostgresConnection.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: tlsSetting)
        configuration.options.connectTimeout = .seconds(Int64(connectTimeout))
        return configuration
    }
}

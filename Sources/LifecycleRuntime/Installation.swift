import Foundation
import JobRunner
import Lifecycle
import PostgresBackend
import SQLiteBackend

/// Work that runs on whichever backend a configuration names. A protocol rather than a
/// closure because the body is generic over the store: Swift closures cannot be.
public protocol InstallationBody {
    associatedtype Output
    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> Output
}

extension LifecycleConfiguration {
    /// Opens the installation and runs `body` on it: the SQLite or PostgreSQL store (one
    /// `initialize()` made, refused with `.inputMissing` otherwise, without creating
    /// anything; its schema brought up to date, the reference app's tables only when the
    /// data map is the reference app's), the blob store, and the policies and data map, each parsed once
    /// for everything the body does. A PostgreSQL store is closed when the body returns; a
    /// SQLite file is closed once the services are released.
    ///
    /// A failure to open is a `LifecycleError` whose category says what to do. Errors the
    /// body throws come back as thrown (a SQLite file found full or damaged is named);
    /// `LifecycleError(classifying:)` gives any of them a category.
    public func withInstallation<Body: InstallationBody>(_ body: Body) async throws -> Body.Output {
        try validateLocations()
        let dataMap = Result { try DataMap(jobsDirectory: jobsDirectory) }
        // A map that cannot be read counts as the reference app's: what needs the map reports it.
        let referenceSchema = (try? dataMap.get().lifecycleOwnsSchema) ?? true
        guard usesPostgres else {
            try refuseSharedSQLiteFile()
            let services: LifecycleServices<SQLiteStore>
            do {
                try refuseUnlessInstalled(try SQLiteStore.installationState(path: database), location: "SQLite file \(database)")
                services = try await self.services(
                    around: try SQLiteStore(path: database, referenceSchema: referenceSchema), dataMap: dataMap)
            } catch {
                throw LifecycleError(classifying: SQLiteStoreError.classify(error, path: database) ?? error)
            }
            do {
                return try await body.run(services: services)
            } catch {
                // A full disk or a damaged file is named with the file, wherever it surfaced.
                throw SQLiteStoreError.classify(error, path: database) ?? error
            }
        }
        let store: PostgresStore
        do {
            store = try await PostgresStore(try postgresLocation(), logger: databaseLogger, migrating: false)
        } catch {
            throw LifecycleError(classifying: error)
        }
        defer { store.close() }
        do {
            try refuseUnlessInstalled(try await store.installationState, location: store.location)
            // An installation made by an older release is brought up to date as it is opened.
            try await store.migrate(referenceSchema: referenceSchema)
        } catch {
            throw LifecycleError(classifying: error)
        }
        let services: LifecycleServices<PostgresStore>
        do {
            services = try await self.services(around: store, dataMap: dataMap)
        } catch {
            throw LifecycleError(classifying: error)
        }
        return try await body.run(services: services)
    }

    /// Creates the installation, or brings an existing one up to date: lifecycle's own
    /// tables, plus the reference app's when the data map is the reference app's. An app's
    /// own database must exist already (a SQLite file is created only for the reference
    /// app), and its data map must hold against it: `init` never starts an installation
    /// that every later command would refuse.
    public func initialize() async throws -> InitializeReport {
        try validateLocations()
        let dataMap = try DataMap(jobsDirectory: jobsDirectory)
        let referenceSchema = dataMap.lifecycleOwnsSchema
        if !usesPostgres { try refuseSharedSQLiteFile() }
        if !referenceSchema {
            // Checked before lifecycle's own tables are added, against the app's tables alone.
            let (catalog, location) = try await readCatalog()
            let plan = try DataMapPlan(map: dataMap, catalog: catalog)
            try Self.requireAccess(plan, location: location)
        }
        guard usesPostgres else {
            do {
                let before = try SQLiteStore.installationState(path: database)
                let store = try SQLiteStore(path: database, referenceSchema: referenceSchema)
                return InitializeReport(
                    database: "SQLite file \(database)", created: before != .initialised, referenceSchema: referenceSchema,
                    migrations: try store.appliedMigrations)
            } catch {
                throw LifecycleError(classifying: SQLiteStoreError.classify(error, path: database) ?? error)
            }
        }
        do {
            let store = try await PostgresStore(try postgresLocation(), logger: databaseLogger, migrating: false)
            defer { store.close() }
            let before = try await store.installationState
            let migrations = try await store.migrate(referenceSchema: referenceSchema, initialising: true)
            return InitializeReport(database: store.location, created: before != .initialised, referenceSchema: referenceSchema, migrations: migrations)
        } catch {
            throw LifecycleError(classifying: error)
        }
    }

    /// Lifecycle keeps secrets in its SQLite file beside the app's tables (the salt and
    /// keyed digests of purged lookup values, signed links waiting in the outbox): a file
    /// other users of the machine can open gives them away. Lifecycle creates its own files
    /// private; an app's file (made by the app with its umask, often 0644) is refused until
    /// it is. Group access stays the operator's choice (an app and lifecycle in one group).
    private func refuseSharedSQLiteFile() throws {
        var info = stat()
        // Only a file: a folder given as the database is named as what it is when it is opened.
        guard stat(database, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_mode & 0o007 != 0 else { return }
        throw LifecycleError(.permissionDenied, """
            SQLite file \(database) is open to every user of this machine (mode \(String(info.st_mode & 0o777, radix: 8))), and lifecycle \
            keeps secrets in it (the lookup salt and digests, signed links waiting in the outbox). Run `chmod o-rwx \(database)` \
            (and its -wal and -shm files, if any), or keep lifecycle's state on PostgreSQL; nothing was changed
            """)
    }

    /// Mistyped locations are usage errors, named before anything is opened or refused.
    private func validateLocations() throws {
        try BlobLocation.validate(blobs, environment: environment)
        if let exports = exportLocation {
            try BlobLocation.validate(exports, environment: environment, option: "--exports", variable: "LIFECYCLE_EXPORTS")
            try BlobLocation.requireApart(exports: exports, blobs: blobs, environment: environment)
        }
        if usesPostgres { _ = try postgresLocation() }
    }

    private func refuseUnlessInstalled(_ state: InstallationState, location: String) throws {
        let why: String
        switch state {
        case .initialised: return
        case .missing: why = "\(location) does not exist"
        case .uninitialised: why = "\(location) has no lifecycle tables"
        }
        throw LifecycleError(.inputMissing, """
            no lifecycle installation: \(why). Pass the installation's --database (or LIFECYCLE_DATABASE), or create \
            one there with `lifecycle init`; nothing was created
            """)
    }

    /// The services around a store the caller opened itself (as `lifecycle demo` does, always
    /// with the reference schema): the policies, the blob store, the clock and the logger.
    public func services<Store: LifecycleStore>(around store: Store) async throws -> LifecycleServices<Store> {
        try await services(around: store, dataMap: Result { try DataMap(jobsDirectory: jobsDirectory) })
    }

    private func services<Store: LifecycleStore>(
        around store: Store, dataMap: Result<DataMap, any Error>
    ) async throws -> LifecycleServices<Store> {
        let policies = try policies()
        let blobStore = try await BlobLocation.open(blobs, environment: environment)
        var exportStore: (any BlobStore)?
        if let exports = exportLocation {
            try BlobLocation.requireApart(exports: exports, blobs: blobs, environment: environment)
            exportStore = try await BlobLocation.open(exports, environment: environment, option: "--exports", variable: "LIFECYCLE_EXPORTS")
        }
        var services = LifecycleServices(
            store: store, blobs: blobStore, policies: policies, jobsDirectory: jobsDirectory, clock: clock, logger: logger,
            dataMap: dataMap, exports: exportStore)
        services.signingKeyFile = signingKeyFile
        return services
    }

    /// Every policy file in `<jobsDirectory>/policies`; a malformed one is `.badInput`.
    public func policies() throws -> PolicyBook {
        do {
            return try PolicyBook(jobsDirectory: jobsDirectory)
        } catch let error as JobRunnerError {
            throw LifecycleError(.badInput, "policy files in \(jobsDirectory)/policies: \(error.message)")
        }
    }

    /// Refuses a role that cannot see or change every row the map names (row level
    /// security it does not bypass, a missing privilege): its purges would report success
    /// having erased nothing, its exports hand out part of an account.
    public static func requireAccess(_ plan: DataMapPlan, location: String) throws {
        let access = Dictionary(plan.catalog.tables.map { ($0.key, $0.value.access) }, uniquingKeysWith: { first, _ in first })
        let problems = plan.accessProblems(access)
        guard problems.isEmpty else {
            throw LifecycleError(.permissionDenied, """
                \(location): the role lifecycle connects as cannot see or change every row the data map names:
                \(problems.map { "  - " + $0 }.joined(separator: "\n"))
                """)
        }
    }

    /// Runs read-only statements generated from the map (a look into JSON columns) on the
    /// database without writing anything; each statement's rows, first column as text.
    public func readRows(_ statements: [SQLStatement]) async throws -> [[String]] {
        guard usesPostgres else {
            return try SQLiteStore.readRows(path: database, statements)
        }
        let store = try await PostgresStore(try postgresLocation(), logger: databaseLogger, migrating: false)
        defer { store.close() }
        return try await store.read { tx in try statements.map { try tx.rows($0).compactMap { $0.first?.text } } }
    }

    /// The database's tables, columns and keys, read without writing anything (not even
    /// lifecycle's own tables), and where they were read: for checking a data map against
    /// an app's database before lifecycle touches it.
    public func readCatalog() async throws -> (catalog: SchemaCatalog, location: String) {
        guard usesPostgres else {
            guard FileManager.default.fileExists(atPath: database) else {
                throw LifecycleError(.inputMissing, "\(database): no such database file; pass the app's database with --database (or LIFECYCLE_DATABASE)")
            }
            return (try SQLiteStore.catalog(path: database), "SQLite file \(database)")
        }
        let store = try await PostgresStore(try postgresLocation(), logger: databaseLogger, migrating: false)
        defer { store.close() }
        return (try await store.catalog(), store.location)
    }
}

/// What `initialize()` found and did.
public struct InitializeReport: Codable, Sendable {
    public var database: String
    /// False when the database was an installation already (then only brought up to date).
    public var created: Bool
    /// Whether the reference app's tables are part of the installation.
    public var referenceSchema: Bool
    public var migrations: [String]
    /// An app whose sessions name their user only encoded (`django_session`): the rows
    /// decoded into lifecycle's index of them, so the first deletion request reads a user's
    /// sessions, not the table. Nil without such a table.
    public var sessionRowsIndexed: Int?

    enum CodingKeys: String, CodingKey {
        case database, created, referenceSchema = "reference_schema", migrations, sessionRowsIndexed = "session_rows_indexed"
    }
}

/// Brings lifecycle's index of an encoded table up to date (`init` builds it, in short
/// transactions, before any request needs it); nil when the map has no such table.
public struct IndexEncodedOwners: InstallationBody {
    public init() {}

    public func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> Int? {
        let data = try await services.directory().data
        guard data.hasEncodedRemovals else { return nil }
        return try await data.refreshEncodedOwners(store: services.store).indexed
    }
}

/// The embedded backend, a SQLite file: what `lifecycle demo` builds its tour on.
public typealias EmbeddedStore = SQLiteStore

extension LifecycleConfiguration {
    /// The embedded store at `database` (created with the reference app's schema when it
    /// does not exist, brought up to date when it does) and the services around it.
    public func embeddedServices() async throws -> LifecycleServices<EmbeddedStore> {
        try await services(around: try SQLiteStore(path: database))
    }

    /// Where the installation's database is and which migrations it has, for `migrate`.
    public static func schema(of store: some LifecycleStore) async throws -> (database: String, migrations: [String]) {
        switch store {
        case let sqlite as SQLiteStore: (sqlite.path, try sqlite.appliedMigrations)
        case let postgres as PostgresStore: (postgres.server.description, try await postgres.appliedMigrations)
        default: (store.location, [])
        }
    }
}

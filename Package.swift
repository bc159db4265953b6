// swift-tools-version:6.1
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "AccountLifecycle",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "lifecycle", targets: ["lifecycle"]),
        .library(name: "Lifecycle", targets: ["Lifecycle"]),
        .library(name: "JobRunner", targets: ["JobRunner"]),
        .library(name: "SQLiteBackend", targets: ["SQLiteBackend"]),
        .library(name: "PostgresBackend", targets: ["PostgresBackend"]),
        .library(name: "Archiving", targets: ["Archiving"]),
        .library(name: "Imaging", targets: ["Imaging"]),
        .library(name: "Credentials", targets: ["Credentials"]),
        .library(name: "ObjectStorage", targets: ["ObjectStorage"]),
        .library(name: "LifecycleRuntime", targets: ["LifecycleRuntime"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.0.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.0.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.100.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.1.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.20.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.8.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.21.0"),
    ],
    targets: [
        // C libraries from Debian, one system-library target each.
        .systemLibrary(name: "CArchive", pkgConfig: "libarchive", providers: [.apt(["libarchive-dev", "zlib1g-dev"])]),
        // libvips' headers only: CVips opens the library itself on first use. glib-2.0, not
        // vips: its flags are the include paths the headers need, while vips.pc adds -pthread
        // (from OpenEXR), which SwiftPM refuses with a warning on every build.
        .systemLibrary(name: "CVipsSystem", pkgConfig: "glib-2.0", providers: [.apt(["libvips-dev"])]),
        .target(name: "CVips", dependencies: ["CVipsSystem"]),
        .systemLibrary(name: "CCrypt", pkgConfig: "libcrypt", providers: [.apt(["libcrypt-dev"])]),
        .systemLibrary(name: "CArgon2", pkgConfig: "libargon2", providers: [.apt(["libargon2-dev"])]),
        // Linux system calls glibc does not wrap (openat2) and kernel constants; headers only.
        .systemLibrary(name: "CLinux"),
        // SQLite settings that only its variadic sqlite3_config reaches; header only.
        .systemLibrary(name: "CSQLiteTuning"),

        .target(name: "Archiving", dependencies: ["CArchive"], swiftSettings: strict),
        .target(name: "Imaging", dependencies: ["CVips"], swiftSettings: strict),
        .target(
            name: "Credentials",
            dependencies: [
                "CCrypt", "CArgon2",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "JobRunner",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "Lifecycle",
            dependencies: [
                "JobRunner", "Archiving", "Imaging", "Credentials", "CLinux",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "SQLiteBackend",
            dependencies: [
                "Lifecycle", "JobRunner", "CLinux", "CSQLiteTuning",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "ObjectStorage",
            dependencies: [
                "Lifecycle", "JobRunner",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "PostgresBackend",
            dependencies: [
                "Lifecycle", "JobRunner",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // A throwaway PostgreSQL cluster for tests and benchmarks of the PostgreSQL backend.
        .target(
            name: "PostgresTesting",
            dependencies: [
                "PostgresBackend",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // What the CLI and an app backend embedding lifecycle share: opening an installation
        // from its configuration, the purge drain, copying a store to PostgreSQL.
        .target(
            name: "LifecycleRuntime",
            dependencies: [
                "Lifecycle", "JobRunner", "Imaging", "SQLiteBackend", "PostgresBackend", "ObjectStorage", "CLinux",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strict
        ),
        // `lifecycle serve`: HTTP on Hummingbird (the download links).
        .target(
            name: "LifecycleServer",
            dependencies: [
                "LifecycleRuntime", "Lifecycle", "JobRunner", "Archiving", "Imaging",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            // The API's description, read by people, clients' generators and the tests' schemathesis run.
            exclude: ["openapi.yaml"],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "lifecycle",
            dependencies: [
                "LifecycleRuntime", "LifecycleServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),

        // Waits for the tests' child processes off the cooperative pool.
        .target(name: "ChildProcesses", path: "Tests/ChildProcesses", swiftSettings: strict),
        .testTarget(
            name: "ArchivingTests", dependencies: ["Archiving", "ChildProcesses", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strict),
        .testTarget(name: "ImagingTests", dependencies: ["Imaging", "CArchive", "ChildProcesses"], swiftSettings: strict),
        .testTarget(name: "CredentialsTests", dependencies: ["Credentials"], resources: [.copy("Vectors")], swiftSettings: strict),
        .testTarget(
            name: "JobRunnerTests",
            dependencies: ["JobRunner", "SQLiteBackend", "PostgresBackend", "PostgresTesting", "ChildProcesses", .product(name: "GRDB", package: "GRDB.swift"),
                           .product(name: "PostgresNIO", package: "postgres-nio"), .product(name: "Yams", package: "Yams")],
            swiftSettings: strict),
        .testTarget(
            name: "LifecycleTests",
            dependencies: [
                "Lifecycle", "SQLiteBackend", "PostgresBackend", "PostgresTesting", "JobRunner", "Imaging", "ChildProcesses",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "ObjectStorageTests",
            dependencies: [
                "ObjectStorage", "Lifecycle", "JobRunner", "SQLiteBackend", "ChildProcesses", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            exclude: ["Fixtures"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "LifecycleRuntimeTests",
            dependencies: ["LifecycleRuntime", "Lifecycle", "JobRunner", "SQLiteBackend", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: strict
        ),
        .testTarget(
            name: "CLITests",
            dependencies: [
                "Lifecycle", "LifecycleServer", "SQLiteBackend", "JobRunner", "PostgresBackend", "PostgresTesting", "CArchive", "ChildProcesses",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            // DjangoTokens: the token tests' Django settings and management commands (Python).
            exclude: ["Schemas", "Browser", "DjangoTokens"],
            swiftSettings: strict
        ),
    ]
)

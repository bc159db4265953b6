// swift-tools-version:6.1
// libFuzzer targets for AccountLifecycle, kept out of the main package so its
// builds and tests never see the fuzzer runtime or its unsafe flags.
// Build and run: scripts/fuzz.sh (see there for the exact commands).
import PackageDescription

// No top-level code: each target's only entry point is the `<module>_main`
// symbol SwiftPM links as main(), which hands over to libFuzzer's driver.
let fuzzTarget: [SwiftSetting] = [.unsafeFlags(["-parse-as-library"])]

let package = Package(
    name: "AccountLifecycleFuzz",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "AccountLifecycle", path: ".."),
    ],
    targets: [
        // Declares libFuzzer's driver entry point; the runtime itself comes with -sanitize=fuzzer.
        .systemLibrary(name: "CLibFuzzer"),
        .executableTarget(
            name: "FuzzPhotoHeader",
            dependencies: ["CLibFuzzer", .product(name: "Imaging", package: "AccountLifecycle")],
            swiftSettings: fuzzTarget
        ),
        .executableTarget(
            name: "FuzzImportLine",
            dependencies: ["CLibFuzzer", .product(name: "Lifecycle", package: "AccountLifecycle")],
            swiftSettings: fuzzTarget
        ),
    ]
)

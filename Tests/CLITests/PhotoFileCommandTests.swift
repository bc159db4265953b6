import Foundation
import Testing

/// `lifecycle photos normalize-file IN OUT`: the recipe and refusals as an operator
/// or a script meets them, exit codes and messages included.
struct PhotoFileCommandTests {
    @Test(arguments: [
        ("portrait.heic", 1024),    // HEIC 1200² with EXIF
        ("avatar-alpha.png", 480),  // PNG 640×480 with alpha and text chunks: never enlarged
        ("trail.jpg", 768),         // JPEG 1024×768
        ("run.jpg", 1024),          // JPEG with GPS tags and orientation 6
    ])
    func eachAllowedFormatBecomesACleanSquareJPEG(name: String, side: Int) async throws {
        let workspace = try Workspace()
        let output = workspace.root + "/out.jpg"
        let result = try await workspace.run(["photos", "normalize-file", repositoryRoot + "/Jobs/demo/photos/" + name, output])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("JPEG \(side)×\(side)"))
        try await expectCleanSquareJPEG(atPath: output, side: side)
        // Only the output: no temporary file left beside it.
        #expect(try FileManager.default.contentsOfDirectory(atPath: workspace.root).filter { $0.hasPrefix("out") } == ["out.jpg"])
    }

    /// The HEIF decoders (libheif, libde265, x265, libaom, dav1d) are opened by the first
    /// HEIC photo, not at start: a process that sees only JPEG and PNG never maps them. Seen
    /// through the dynamic loader's own record of the files it opens (LD_DEBUG=files,
    /// written to a file of its own so the command's stderr stays its own).
    @Test func onlyAHEICInputOpensTheHEIFDecoders() async throws {
        let workspace = try Workspace()
        var opened: [String: String] = [:]
        for (index, name) in ["trail.jpg", "avatar-alpha.png", "portrait.heic"].enumerated() {
            let record = workspace.root + "/loader-\(index)"
            let result = try await workspace.run(
                ["photos", "normalize-file", repositoryRoot + "/Jobs/demo/photos/" + name, workspace.root + "/\(name).out.jpg"],
                environment: ["LD_DEBUG": "files", "LD_DEBUG_OUTPUT": record])
            #expect(result.status == 0, "\(name): \(result.stderr)")
            // The loader appends the process id to the file's name.
            let files = try FileManager.default.contentsOfDirectory(atPath: workspace.root).filter { $0.hasPrefix("loader-\(index).") }
            let text = try files.map { try String(contentsOfFile: workspace.root + "/" + $0, encoding: .utf8) }.joined()
            #expect(text.contains("file=libvips.so.42"), "\(name): the loader's record is missing")
            opened[name] = text
        }
        for name in ["trail.jpg", "avatar-alpha.png"] {
            #expect(opened[name]?.contains("vips-heif.so") == false, "\(name)")
            #expect(opened[name]?.contains("file=libheif.so") == false, "\(name)")
        }
        #expect(opened["portrait.heic"]?.contains("/vips-heif.so") == true)
        #expect(opened["portrait.heic"]?.contains("file=libheif.so") == true)
    }

    /// A HEIF module that cannot be opened is the library missing (exit 69, try again once
    /// it is installed), never the photo refused: libvips copied beside a damaged module,
    /// where the command finds it (the module is looked for beside the libvips it opened).
    @Test func aHEICWhoseModuleCannotOpenExits69AndAJPEGStillWorks() async throws {
        let workspace = try Workspace()
        let system = "/usr/lib/x86_64-linux-gnu"
        let moduleDirectory = try #require(try FileManager.default.contentsOfDirectory(atPath: system).first { $0.hasPrefix("vips-modules-") })
        let library = workspace.root + "/lib"
        try FileManager.default.createDirectory(atPath: library + "/" + moduleDirectory, withIntermediateDirectories: true)
        // A copy, not a link: the module is looked for beside the file the loader resolved.
        try FileManager.default.copyItem(
            atPath: URL(fileURLWithPath: system + "/libvips.so.42").resolvingSymlinksInPath().path, toPath: library + "/libvips.so.42")
        try Data("not a shared object".utf8).write(to: URL(fileURLWithPath: library + "/" + moduleDirectory + "/vips-heif.so"))
        let environment = ["LD_LIBRARY_PATH": library]

        let heic = try await workspace.run(
            ["photos", "normalize-file", repositoryRoot + "/Jobs/demo/photos/portrait.heic", workspace.root + "/heic.jpg"], environment: environment)
        #expect(heic.status == 69, "\(heic.stderr)")
        #expect(heic.stderr.contains("cannot load the libvips HEIF module \(library)/\(moduleDirectory)/vips-heif.so"), "\(heic.stderr)")
        #expect(heic.stderr.contains("install libheif1 and libvips42"), "\(heic.stderr)")
        #expect(!FileManager.default.fileExists(atPath: workspace.root + "/heic.jpg"))

        let jpeg = try await workspace.run(
            ["photos", "normalize-file", repositoryRoot + "/Jobs/demo/photos/trail.jpg", workspace.root + "/jpeg.jpg"], environment: environment)
        #expect(jpeg.status == 0, "\(jpeg.stderr)")
    }

    @Test func everyRefusedFileExits65WithTheProductMessageAndLeavesNoOutput() async throws {
        let workspace = try Workspace()
        let inputs = workspace.root + "/in"
        let outputs = workspace.root + "/out"
        try FileManager.default.createDirectory(atPath: inputs, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: outputs, withIntermediateDirectories: true)
        let refused = try await RefusedPhoto.make(in: inputs)
        #expect(refused.count == 12)
        for (name, message) in refused.sorted(by: { $0.key < $1.key }) {
            let result = try await workspace.run(["photos", "normalize-file", inputs + "/" + name, outputs + "/" + name + ".out.jpg"])
            #expect(result.status == 65, "\(name): exit \(result.status), \(result.stderr)")
            #expect(result.stderr.hasPrefix("error: \(message)\n"), "\(name): \(result.stderr)")
            // The second line is for the operator: which file, and what exactly was wrong.
            #expect(result.stderr.contains("  \(inputs)/\(name): "), "\(name): \(result.stderr)")
            #expect(result.stdout.isEmpty)
        }
        // No partial output, no temporary file, for any of them.
        #expect(try FileManager.default.contentsOfDirectory(atPath: outputs).isEmpty)
    }

    @Test func aRefusalInJSONCarriesCodeMessageAndDetail() async throws {
        let workspace = try Workspace()
        let input = workspace.root + "/bomb.png"
        try RefusedPhoto.pngHeader(width: 100_000, height: 100_000).write(to: URL(fileURLWithPath: input))
        let result = try await workspace.run(["photos", "normalize-file", input, workspace.root + "/out.jpg", "--json"])
        #expect(result.status == 65)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: String])
        #expect(report["status"] == "rejected")
        #expect(report["code"] == "dimensionsTooLarge")
        #expect(report["message"] == RefusedPhoto.tooManyPixels)
        #expect(report["detail"]?.contains("100000×100000") == true)
    }

    @Test func missingInputExits66AndAMissingOutputDirectory64() async throws {
        let workspace = try Workspace()
        let missing = try await workspace.run(["photos", "normalize-file", workspace.root + "/nope.heic", workspace.root + "/out.jpg"])
        #expect(missing.status == 66)
        #expect(missing.stderr.contains("nope.heic: no such file"))
        let noDirectory = try await workspace.run([
            "photos", "normalize-file", repositoryRoot + "/Jobs/demo/photos/trail.jpg", workspace.root + "/no/such/dir/out.jpg",
        ])
        #expect(noDirectory.status == 64)
        #expect(noDirectory.stderr.contains("does not exist"))
    }
}

import CLibFuzzer
import Foundation
import Imaging

/// main() of this executable, as SwiftPM links it (see CLibFuzzer): runs
/// libFuzzer with the command line, e.g. a corpus directory and -max_total_time.
@_cdecl("FuzzPhotoHeader_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv) { data, size in
        // libFuzzer passes a real buffer even for empty input; guard anyway.
        guard let data else { return 0 }
        return fuzz(data, size)
    }
}

/// One normalizer for the whole run: libvips starts once per process.
private let normalizer = PhotoNormalizer()

/// Sniffing, Imaging's own header parsers and `PhotoNormalizer.inspect`
/// (which adds the libvips loader check and libvips' header read) on
/// arbitrary bytes. Refusals are the expected outcome for almost every
/// input; a crash, a sanitizer report or a broken invariant is a bug.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Data(bytes: data, count: size)
    let format = PhotoFormat(sniffing: input)
    let parsed = try? PhotoHeader.read(input)
    if parsed != nil, format == nil {
        fatalError("PhotoHeader parsed content the sniffer refuses")
    }
    guard let info = try? normalizer.inspect(input) else { return 0 }

    // inspect runs the same parse first, so it cannot accept what the parse
    // refused, nor a size the parse found over the limits.
    guard let parsed, parsed.format == info.format else {
        fatalError("inspect accepted \(info) but PhotoHeader gave \(String(describing: parsed))")
    }
    let policy = normalizer.policy
    guard parsed.width * parsed.height <= policy.maxPixels, max(parsed.width, parsed.height) <= policy.maxSide else {
        fatalError("inspect accepted \(info) though PhotoHeader read \(parsed.width)×\(parsed.height)")
    }
    // For JPEG and PNG, libvips reads the very fields the parse read (turned
    // a quarter for orientations 5–8). A HEIF's displayed size may differ
    // from its primary's ispe (irot, clap, a grid's own canvas), so it is
    // not compared.
    if info.format != .heic {
        let same = (parsed.width, parsed.height) == (info.width, info.height)
            || (parsed.width, parsed.height) == (info.height, info.width)
        if !same {
            fatalError("PhotoHeader read \(parsed.width)×\(parsed.height), libvips \(info.width)×\(info.height)")
        }
    }
    return 0
}

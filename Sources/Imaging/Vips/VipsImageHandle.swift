import CVips

/// One owned reference to a VipsImage. Non-copyable so every image Imaging
/// creates is released exactly once, on every path, including throws.
struct VipsImageHandle: ~Copyable {
    let pointer: UnsafeMutablePointer<VipsImage>

    /// Runs a libvips operation that writes a new image to its `out`
    /// argument, turning its failure into a rejection carrying libvips'
    /// message.
    static func make(
        _ step: String,
        _ operation: (UnsafeMutablePointer<UnsafeMutablePointer<VipsImage>?>) -> Int32
    ) throws(PhotoRejection) -> VipsImageHandle {
        var out: UnsafeMutablePointer<VipsImage>?
        let status = operation(&out)
        guard status == 0, let out else {
            if let out { cvips_unref(out) }
            throw .corrupt("\(step): \(VipsRuntime.takeError())")
        }
        return VipsImageHandle(pointer: out)
    }

    /// A new image derived from this one by `operation`.
    func then(
        _ step: String,
        _ operation: (UnsafeMutablePointer<VipsImage>, UnsafeMutablePointer<UnsafeMutablePointer<VipsImage>?>) -> Int32
    ) throws(PhotoRejection) -> VipsImageHandle {
        let input = pointer
        return try VipsImageHandle.make(step) { operation(input, $0) }
    }

    var width: Int { Int(cvips_width(pointer)) }
    var height: Int { Int(cvips_height(pointer)) }
    var bands: Int { Int(cvips_bands(pointer)) }
    var format: VipsBandFormat { cvips_format(pointer) }
    var interpretation: VipsInterpretation { cvips_interpretation(pointer) }
    var hasAlpha: Bool { cvips_image_hasalpha(pointer) != 0 }
    var orientation: Int { Int(cvips_image_get_orientation(pointer)) }
    var orientationSwapsAxes: Bool { cvips_image_get_orientation_swap(pointer) != 0 }

    func has(_ field: String) -> Bool {
        cvips_has_field(pointer, field) != 0
    }

    deinit {
        cvips_unref(pointer)
    }
}

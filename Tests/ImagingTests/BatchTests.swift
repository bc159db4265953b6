import CVips
import Foundation
@testable import Imaging
import Testing

extension ImagingTests {
    @Suite struct Batch {
        let normalizer = PhotoNormalizer()

        /// One small input of each kind the batch tests cycle through.
        static func inputs(in scratch: Scratch) throws -> [Data] {
            let display = Raster.quadrants(width: 96, height: 64)
            return [
                try scratch.orientedJPEG(showing: display, orientation: 6),
                try scratch.pngWithAlpha(width: 80, height: 60) { x, _ in (rgb: .green, alpha: x < 40 ? 0 : 255) },
                try scratch.encode(display, as: "b.heic"),
                try scratch.cmykJPEG(display, embedProfile: true),
            ]
        }

        @Test("same bytes in, same bytes out")
        func deterministic() throws {
            let scratch = try Scratch()
            for input in try Self.inputs(in: scratch) + [try scratch.largeJPEG(width: 2000, height: 1500)] {
                let first = try normalizer.normalize(input)
                // A copy lives at another address: nothing may depend on it.
                let copy = Data(Array(input))
                let second = try normalizer.normalize(copy)
                #expect(first.jpegData == second.jpegData)
                #expect(first == second)
            }
        }

        @Test("photos normalised in parallel match the serial results")
        func parallel() throws {
            let scratch = try Scratch()
            let inputs = try Self.inputs(in: scratch)
            let expected = try inputs.map { try normalizer.normalize($0).jpegData }
            let results = ParallelResults(count: inputs.count * 4)
            let shared = self.normalizer
            DispatchQueue.concurrentPerform(iterations: inputs.count * 4) { i in
                results.store(i, Result { try shared.normalize(inputs[i % inputs.count]).jpegData })
            }
            for i in 0..<inputs.count * 4 {
                #expect(try results[i].get() == expected[i % inputs.count], "run \(i) differs")
            }
        }

        @Test("a 200-photo batch, refusals included, leaks no libvips objects or memory")
        func noLeaks() throws {
            let scratch = try Scratch()
            let good = try Self.inputs(in: scratch)
            let bad = [
                Crafted.gif,
                Crafted.pngClaiming(width: 100_000, height: 100_000),
                try scratch.encode(.gradient(width: 320, height: 240), as: "t.jpg").prefix(3000),
                Crafted.ftyp(major: "heic", compatible: ["mif1"]) + Crafted.noise(count: 2048, seed: 1),
            ]
            let batch = good + bad
            // Warm up: first use creates libvips' long-lived singletons and
            // the worker thread's buffer cache.
            for input in batch { _ = try? normalizer.normalize(input) }
            let objectsBefore = VipsRuntime.liveObjectCount
            // The counter must see objects, or the checks below prove nothing.
            good[0].withUnsafeBytes { bytes in
                let held = cvips_header_from_buffer(bytes.baseAddress, bytes.count)
                #expect(VipsRuntime.liveObjectCount > objectsBefore)
                held.map { cvips_unref($0) }
            }
            #expect(VipsRuntime.liveObjectCount == objectsBefore)

            func runBatch() -> Int {
                (0..<200).filter { (try? normalizer.normalize(batch[$0 % batch.count])) != nil }.count
            }
            #expect(runBatch() == 100)
            let objectsAfterFirst = VipsRuntime.liveObjectCount
            let memoryAfterFirst = VipsRuntime.trackedMemory
            #expect(runBatch() == 100)

            #expect(objectsAfterFirst == objectsBefore)
            #expect(VipsRuntime.liveObjectCount == objectsBefore)
            // Leaked pixel buffers would grow by megabytes per batch; the few
            // kilobytes a worker thread keeps cached between tiles do not.
            #expect(VipsRuntime.trackedMemory <= memoryAfterFirst + (1 << 20))
            #expect(VipsRuntime.trackedAllocations <= 16)
        }
    }
}

/// Slots written by concurrentPerform's workers, each exactly once.
private final class ParallelResults: @unchecked Sendable {
    private let lock = NSLock()
    private var slots: [Result<Data, any Error>?]

    init(count: Int) { slots = Array(repeating: nil, count: count) }

    func store(_ index: Int, _ result: Result<Data, any Error>) {
        lock.lock()
        slots[index] = result
        lock.unlock()
    }

    subscript(index: Int) -> Result<Data, any Error> {
        lock.lock()
        defer { lock.unlock() }
        return slots[index]!
    }
}

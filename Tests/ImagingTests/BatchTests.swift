import CVips
import Foundation
@testable import Imaging
import Testing

extension ImagingTests {
    @Suite struct Batch {
        let normalizer = PhotoNormalizer()

        /// One small input of each kind the batch tests cycle through.
        static func inputs(in scratch: Scratch) async throws -> [Data] {
            let display = Raster.quadrants(width: 96, height: 64)
            return [
                try await scratch.orientedJPEG(showing: display, orientation: 6),
                try await scratch.pngWithAlpha(width: 80, height: 60) { x, _ in (rgb: .green, alpha: x < 40 ? 0 : 255) },
                try await scratch.encode(display, as: "b.heic"),
                try await scratch.cmykJPEG(display, embedProfile: true),
            ]
        }

        @Test("same bytes in, same bytes out")
        func deterministic() async throws {
            let scratch = try Scratch()
            for input in try await Self.inputs(in: scratch) + [try scratch.largeJPEG(width: 2000, height: 1500)] {
                let first = try normalizer.normalize(input)
                // A copy lives at another address: nothing may depend on it.
                let copy = Data(Array(input))
                let second = try normalizer.normalize(copy)
                #expect(first.jpegData == second.jpegData)
                #expect(first == second)
            }
        }

        @Test("an image alone gets every core, one among others a single thread")
        func threadsFollowTheImagesInFlight() async throws {
            let applied = AppliedThreads()
            let threads = RenderThreads(cores: 4, pinned: false) { applied.record($0) }
            threads.render { threads.render { threads.render {} } }
            #expect(applied.values == [4, 1, 1])
            threads.render {}
            #expect(applied.values == [4, 1, 1, 4])
            // An operator's VIPS_CONCURRENCY is left alone.
            let pinned = RenderThreads(cores: 4, pinned: true) { applied.record($0) }
            pinned.render {}
            #expect(applied.values.count == 4)
        }

        @Test("photos normalised in parallel (one thread each) match the serial results (every core)")
        func parallel() async throws {
            let scratch = try Scratch()
            let inputs = try await Self.inputs(in: scratch) + [try scratch.largeJPEG(width: 2000, height: 1500)]
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
        func noLeaks() async throws {
            let scratch = try Scratch()
            let good = try await Self.inputs(in: scratch)
            let bad = [
                Crafted.gif,
                Crafted.pngClaiming(width: 100_000, height: 100_000),
                try await scratch.encode(.gradient(width: 320, height: 240), as: "t.jpg").prefix(3000),
                Crafted.ftyp(major: "heic", compatible: ["mif1"]) + Crafted.noise(count: 2048, seed: 1),
            ]
            let batch = good + bad
            // Warm up: first use creates libvips' long-lived singletons and
            // the worker thread's buffer cache.
            for input in batch { _ = try? normalizer.normalize(input) }
            // libvips' counters are process-wide and other suites in this process use
            // libvips at the same time, so compare quiet moments (no image alive
            // anywhere) rather than two arbitrary instants. A leak never gets quiet.
            let baseline = try #require(Self.quietMoment(), "libvips never became idle")
            // The counter must see objects, or the checks below prove nothing.
            good[0].withUnsafeBytes { bytes in
                let held = cvips_header_from_buffer(bytes.baseAddress, bytes.count)
                #expect(VipsRuntime.liveObjectCount > 0)
                held.map { cvips_unref($0) }
            }

            func runBatch() -> Int {
                (0..<200).filter { (try? normalizer.normalize(batch[$0 % batch.count])) != nil }.count
            }
            #expect(runBatch() == 100)
            let afterFirst = try #require(Self.quietMoment(), "libvips objects stayed alive after the first batch")
            #expect(runBatch() == 100)
            let afterSecond = try #require(Self.quietMoment(), "libvips objects stayed alive after the second batch")
            // Leaked pixel buffers would grow by megabytes per batch; the few
            // kilobytes a worker thread keeps cached between tiles do not.
            #expect(afterSecond <= max(afterFirst, baseline) + (1 << 20))
        }
    }
}

extension ImagingTests.Batch {
    /// Waits (up to 60 s) for an instant when no libvips object is alive in the
    /// process and returns the memory libvips still tracks then.
    static func quietMoment() -> Int? {
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            if VipsRuntime.liveObjectCount == 0 { return VipsRuntime.trackedMemory }
            usleep(1_000)
        }
        return nil
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

final class AppliedThreads: @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [Int] = []
    func record(_ value: Int) { lock.withLock { recorded.append(value) } }
    var values: [Int] { lock.withLock { recorded } }
}

import CacheTestSupport
import Foundation
import LMDBCache

/// `cache-test-helper faults DIR [address-space]`: one pass through every kind of operation,
/// printing one line per step, for a run with a fault injected (by the `inject-faults`
/// interposer, or by an address-space limit) that must end in clear errors, never a crash.
///
/// Steps: open, write, flush, read, compact, trim, close. Each prints "STEP ok" or
/// "STEP error CASE: MESSAGE" for a `CacheError` (CASE is its case name), or
/// "STEP unexpected MESSAGE" for any other error; read prints
/// "read hits H misses M errors E wrong W". Then "done", exit 0.
///
/// With `address-space`, the map starts at 32 MiB and, once the store is open, `prlimit` caps
/// this process's address space 16 MiB above what it uses, so the map cannot double (the next
/// `mmap` fails with ENOMEM) while ordinary allocations still fit.
enum FaultScenario {
    static let keyCount = 300
    static let addressSpaceKeyCount = 4_600

    static func run(directory: URL, limitAddressSpace: Bool) {
        var configuration = DiskCache.Configuration()
        configuration.initialMapSize = limitAddressSpace ? 32 << 20 : 1 << 20
        configuration.freeSpaceLimit = 1  // makes writes look at the volume's free space (statvfs)
        configuration.automaticTrimming = false
        configuration.compressionThreshold = nil  // sampleBytes below is incompressible anyway
        let keys = limitAddressSpace ? addressSpaceKeyCount : keyCount
        guard let disk = step("open", { try DiskCache(directory: directory, configuration: configuration) }) else {
            print("done")
            return
        }
        if limitAddressSpace {
            guard limitOwnAddressSpace(headroom: 16 << 20) else {
                print("prlimit failed")
                exit(3)
            }
        }
        step("write") {
            for index in 0..<keys {
                try disk.setData(value(index), forKey: "f\(index)")
                // Bounded memory: the write-behind queue is emptied every 100 values.
                if index % 100 == 99 { try disk.flush() }
            }
        }
        step("flush") { try disk.flush() }
        var (hits, misses, errors, wrong) = (0, 0, 0, 0)
        for index in 0..<keys {
            do {
                switch try disk.data(forKey: "f\(index)") {
                case nil: misses += 1
                case let read? where read == value(index): hits += 1
                case _?: wrong += 1
                }
            } catch {
                errors += 1
            }
        }
        print("read hits \(hits) misses \(misses) errors \(errors) wrong \(wrong)")
        step("compact") { try disk.compact() }
        step("trim") { try disk.trim(toCount: keys / 2) }
        step("close") { disk.close() }
        print("done")
    }

    static func value(_ index: Int) -> [UInt8] {
        sampleBytes(count: 8_000, compressible: false, seed: UInt64(index))
    }

    /// Runs `body` and prints how it ended; its result, or nil when it threw.
    @discardableResult
    static func step<T>(_ name: String, _ body: () throws -> T) -> T? {
        do {
            let result = try body()
            print("\(name) ok")
            return result
        } catch let error as CacheError {
            print("\(name) error \(error.caseName): \(error)")
        } catch {
            print("\(name) unexpected \(error)")
        }
        return nil
    }

    /// Caps this process's address space (RLIMIT_AS) at its current size plus `headroom` by
    /// running `prlimit --pid` on itself: the same limit `prlimit --as=` sets at start, measured
    /// from the running process so the margin does not depend on how large a Swift process is.
    static func limitOwnAddressSpace(headroom: Int) -> Bool {
        guard let report = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = report.split(separator: "\n").first(where: { $0.hasPrefix("VmSize:") }),
            let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { return false }
        let limit = kilobytes * 1_024 + headroom
        // posix_spawn and waitpid: Foundation's Process starts a monitoring thread, which may
        // not fit under the new limit.
        let words: [String] = ["/usr/bin/prlimit", "--pid", "\(getpid())", "--as=\(limit)"]
        let arguments = words.map { strdup($0) } + [nil]
        defer { for argument in arguments { free(argument) } }
        var child: pid_t = 0
        guard posix_spawn(&child, "/usr/bin/prlimit", nil, nil, arguments, environ) == 0 else { return false }
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        guard status == 0 else { return false }
        print("address space limited to \(limit) bytes")
        return true
    }

    static func print(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}

extension CacheError {
    /// The case's name alone ("diskFull"), for lines a test matches.
    var caseName: String {
        if case .closed = self { return "closed" }
        return Mirror(reflecting: self).children.first?.label ?? "?"
    }
}

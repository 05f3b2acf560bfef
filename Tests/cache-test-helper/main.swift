// A second real process for LMDBCache's tests.
//
//   cache-test-helper write DIR PREFIX COUNT
//       sets PREFIX0 ..< PREFIX<COUNT> (values from sampleBytes), reads each back, flushes,
//       prints "done COUNT" and exits 0
//   cache-test-helper churn DIR [periodic]
//       runs ChurnSequence steps forever (in periodic durability when asked); every 50 steps flushes and prints "flushed N" (steps
//       0..<N are durable). Meant to be killed.
//   cache-test-helper hold DIR
//       opens the cache, reads its totals (so it holds a reader slot), prints "open" and waits.
//       Meant to be killed.
import CacheTestSupport
import Foundation
import LMDBCache

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("cache-test-helper: \(message)\n".utf8))
    exit(1)
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else { fail("usage: cache-test-helper write DIR PREFIX COUNT | churn DIR") }
let directory = URL(fileURLWithPath: arguments[2])

do {
    switch arguments[1] {
    case "write":
        guard arguments.count == 5, let count = Int(arguments[4]) else { fail("usage: write DIR PREFIX COUNT") }
        let prefix = arguments[3]
        let disk = try DiskCache(directory: directory)
        for index in 0..<count {
            let value = sampleBytes(count: 64 + index % 2_000, compressible: index % 2 == 0, seed: UInt64(index))
            try disk.setData(value, forKey: "\(prefix)\(index)")
            guard try disk.data(forKey: "\(prefix)\(index)") == value else { fail("read back a different value") }
        }
        try disk.flush()
        disk.close()
        FileHandle.standardOutput.write(Data("done \(count)\n".utf8))
    case "churn":
        var configuration = DiskCache.Configuration()
        if arguments.count > 3 && arguments[3] == "periodic" {
            configuration.durability = .periodic(syncInterval: .milliseconds(100))
        }
        let disk = try DiskCache(directory: directory, configuration: configuration)
        var step = 0
        while true {
            for operation in ChurnSequence.steps(step) {
                switch operation {
                case .set(let key, let value): try disk.setData(value, forKey: key)
                case .remove(let key): try disk.removeData(forKey: key)
                }
            }
            step += 1
            if step % 50 == 0 {
                try disk.flush()
                FileHandle.standardOutput.write(Data("flushed \(step)\n".utf8))
            }
        }
    case "hold":
        let disk = try DiskCache(directory: directory)
        _ = disk.totalCount
        FileHandle.standardOutput.write(Data("open\n".utf8))
        while true { sleep(60) }
        withExtendedLifetime(disk) {}
    default:
        fail("unknown command \(arguments[1])")
    }
} catch {
    fail("\(error)")
}

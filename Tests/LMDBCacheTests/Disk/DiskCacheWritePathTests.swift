import Foundation
import Testing

@testable import LMDBCache

@Suite("Write path, totals and lifecycle")
struct DiskCacheWritePathTests {
    @Test("a value reads back at once, before the writer commits it; a removal hides it at once")
    func readYourWrites() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        for round in 0..<200 {
            let value = sampleBytes(count: 100 + round, compressible: round % 2 == 0, seed: UInt64(round))
            try disk.setData(value, forKey: "k")
            #expect(try disk.data(forKey: "k") == value)
            try disk.removeData(forKey: "k")
            #expect(try disk.data(forKey: "k") == nil)
            try disk.setData(value, forKey: "k")
            #expect(try disk.containsData(forKey: "k"))
        }
    }

    @Test("totals equal a full scan after overwrites, removes, trims and a reopen")
    func totalsExact() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        do {
            let disk = try DiskCache(directory: dir.url)
            for index in 0..<1_000 {
                try disk.setData(
                    sampleBytes(count: index % 700, compressible: index % 3 == 0, seed: UInt64(index)),
                    forKey: "k\(index)")
            }
            for index in stride(from: 0, to: 1_000, by: 3) {
                try disk.setData(sampleBytes(count: 900, compressible: false, seed: UInt64(index)), forKey: "k\(index)")
            }
            for index in stride(from: 1, to: 1_000, by: 5) { try disk.removeData(forKey: "k\(index)") }
            try disk.removeData(forKey: "never stored")
            try disk.flush()
            try disk.trim(toCount: 600)
            let report = try disk.store.verify()
            #expect(report.isClean, "\(report.indexProblems)")
            #expect(disk.totalCount == 600)
            #expect(disk.totalCount == report.scanned.count)
            #expect(disk.totalCost == report.scanned.bytes)
            disk.close()
        }
        let reopened = try DiskCache(directory: dir.url)
        defer { reopened.close() }
        let report = try reopened.store.verify()
        #expect(report.isClean)
        #expect(reopened.totalCount == 600)
        #expect(reopened.totalCost == report.scanned.bytes)
    }

    @Test("removeAll empties the store, queued writes included")
    func removeAll() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        for index in 0..<100 { try disk.setData([1, 2, 3], forKey: "k\(index)") }
        try disk.flush()
        try disk.setData([4], forKey: "queued")
        try disk.removeAll()
        #expect(disk.totalCount == 0)
        #expect(disk.totalCost == 0)
        #expect(try disk.data(forKey: "queued") == nil)
        #expect(try disk.data(forKey: "k1") == nil)
        #expect(try disk.store.verify().isClean)
    }

    @Test("with a tiny queue limit, writers wait for the writer thread and nothing is lost")
    func backpressure() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var configuration = DiskCache.Configuration()
        configuration.maxPendingBytes = 1
        let disk = try DiskCache(directory: dir.url, configuration: configuration)
        defer { disk.close() }
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for index in 0..<200 {
                let key = "t\(thread)-\(index)"
                try? disk.setData(Array(key.utf8), forKey: key)
            }
        }
        try disk.flush()
        #expect(disk.totalCount == 800)
        #expect(try disk.data(forKey: "t3-199") == Array("t3-199".utf8))
    }

    @Test("a reopened cache holds every flushed write")
    func reopenSeesFlushedWrites() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        for index in 0..<5_000 { try disk.setData(Array("v\(index)".utf8), forKey: "k\(index)") }
        try disk.flush()
        disk.close()
        let reopened = try DiskCache(directory: dir.url)
        defer { reopened.close() }
        #expect(reopened.totalCount == 5_000)
        for index in stride(from: 0, to: 5_000, by: 7) {
            #expect(try reopened.data(forKey: "k\(index)") == Array("v\(index)".utf8))
        }
    }

    @Test("in synchronous mode a write is committed when setData returns")
    func synchronousMode() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var configuration = DiskCache.Configuration()
        configuration.durability = .synchronous
        let disk = try DiskCache(directory: dir.url, configuration: configuration)
        defer { disk.close() }
        try disk.setData([1, 2, 3], forKey: "k")
        #expect(disk.store.pending(try StorageKey(Array("k".utf8))) == nil, "nothing left queued")
        #expect(disk.totalCount == 1, "committed totals include it without a flush")
    }

    @Test("every call after close throws CacheError.closed; close twice is harmless")
    func useAfterClose() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        try disk.setData([1], forKey: "k")
        disk.close()
        disk.close()
        #expect(throws: CacheError.closed) { try disk.setData([1], forKey: "k") }
        #expect(throws: CacheError.closed) { try disk.data(forKey: "k") }
        #expect(throws: CacheError.closed) { try disk.removeData(forKey: "k") }
        #expect(throws: CacheError.closed) { try disk.flush() }
        #expect(throws: CacheError.closed) { try disk.trim(toCount: 0) }
        #expect(disk.totalCount == 0)
        let reopened = try DiskCache(directory: dir.url)
        defer { reopened.close() }
        #expect(try reopened.data(forKey: "k") == [1], "close flushed the queued write")
    }

    @Test("two handles on one directory share one store and see each other's writes at once")
    func handlesShareOneStore() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let first = try DiskCache(directory: dir.url)
        let second = try DiskCache(directory: dir.url.appendingPathComponent("../\(dir.url.lastPathComponent)"))
        #expect(first.store === second.store)
        try first.setData([7], forKey: "k")
        #expect(try second.data(forKey: "k") == [7])
        first.close()
        #expect(try second.data(forKey: "k") == [7], "the store stays open for the other handle")
        second.close()
    }

    @Test("many threads writing and reading at once lose nothing")
    func concurrentThreads() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for index in 0..<500 {
                let key = "t\(thread)-\(index)"
                try? disk.setData(Array(key.utf8), forKey: key)
                if (try? disk.data(forKey: key)) != Array(key.utf8) { Issue.record("lost \(key)") }
            }
        }
        try disk.flush()
        #expect(disk.totalCount == 4_000)
        #expect(try disk.store.verify().isClean)
    }
}

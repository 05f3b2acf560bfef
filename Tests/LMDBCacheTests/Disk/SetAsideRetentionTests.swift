import Foundation
import Glibc
import Testing

import LMDBCacheStorage

@testable import LMDBCache

/// A damaged store is set aside as `data.mdb.damaged-<unix time>`; repeated damage must not fill
/// the disk with them. Earlier set-asides are made here by name (two set-asides within one second
/// share a name), then a real one is set aside by opening a file that is not an LMDB store.
@Suite("Faults: set-aside damaged stores are kept to the newest few")
struct SetAsideRetentionTests {
    /// How many set-aside files DiskTier.md (LMDBCache.docc) says are kept, the one just set aside included.
    static let kept = 3
    static let garbage = Data(sampleBytes(count: 64 << 10, compressible: false))

    /// `data.mdb.damaged-1000` … `-1004`, oldest first, each a one-byte regular file.
    static func writeEarlierSetAsides(in dir: TemporaryDirectory) throws -> [String] {
        let names = (1_000...1_004).map { "data.mdb.damaged-\($0)" }
        for (index, name) in names.enumerated() {
            try Data([UInt8(index)]).write(to: dir.url.appendingPathComponent(name))
        }
        return names
    }

    /// Opens the directory over a data file that is not an LMDB store, which sets it aside, and
    /// returns the name it was set aside under.
    static func setGarbageAside(in dir: TemporaryDirectory, known: Set<String>) throws -> String {
        try garbage.write(to: dir.url.appendingPathComponent("data.mdb"))
        try DiskCache(directory: dir.url).close()
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: dir.path))
        let fresh = names.subtracting(known).filter { $0.hasPrefix("data.mdb.damaged-") }
        #expect(fresh.count == 1, "one new set-aside file: \(fresh.sorted())")
        let name = try #require(fresh.first)
        #expect(try Data(contentsOf: dir.url.appendingPathComponent(name)) == garbage, "the damaged file is kept")
        return name
    }

    @Test("setting a store aside keeps exactly the newest three set-aside files and removes nothing else")
    func newestKept() throws {
        let dir = TemporaryDirectory()
        let outside = TemporaryDirectory()
        defer {
            dir.remove()
            outside.remove()
        }
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: outside.url, withIntermediateDirectories: true)
        let earlier = try Self.writeEarlierSetAsides(in: dir)
        // Older still, or named almost like one: none is a set-aside file of ours.
        let target = outside.url.appendingPathComponent("precious")
        try Data("do not touch".utf8).write(to: target)
        let symlink = "data.mdb.damaged-1"
        try FileManager.default.createSymbolicLink(
            atPath: dir.url.appendingPathComponent(symlink).path, withDestinationPath: target.path)
        let folder = "data.mdb.damaged-2"
        try FileManager.default.createDirectory(
            at: dir.url.appendingPathComponent(folder).appendingPathComponent("inside"),
            withIntermediateDirectories: true)
        let lookalikes = [
            "data.mdb.damaged-", "data.mdb.damaged--5", "data.mdb.damaged-+7", "data.mdb.damaged-007",
            "data.mdb.damaged-3.bak", "data.mdb.damaged-3 ", "xdata.mdb.damaged-3", "data.mdb.damaged-\u{0663}",
            "data.mdb.damaged-99999999999999999999999", "lock.mdb.damaged-4",
        ]
        for name in lookalikes { try Data([9]).write(to: dir.url.appendingPathComponent(name)) }

        let fresh = try Self.setGarbageAside(
            in: dir, known: Set(earlier + lookalikes + [symlink, folder, "data.mdb", "lock.mdb"]))

        let names = Set(try FileManager.default.contentsOfDirectory(atPath: dir.path))
        let remaining = names.intersection(earlier + [fresh])
        #expect(remaining == Set(earlier.suffix(Self.kept - 1) + [fresh]), "kept: \(remaining.sorted())")
        #expect(remaining.count == Self.kept)
        for name in lookalikes + [symlink, folder] { #expect(names.contains(name), "\(name) is left alone") }
        #expect(try Data(contentsOf: target) == Data("do not touch".utf8), "the link's target is untouched")
        #expect(FileManager.default.fileExists(atPath: dir.url.appendingPathComponent(folder + "/inside").path))
    }

    @Test(
        "a set-aside file another user owns is left alone and not counted",
        .enabled(if: geteuid() == 0, "changing a file's owner needs root"))
    func foreignOwnerLeftAlone() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let earlier = try Self.writeEarlierSetAsides(in: dir)
        let nobody: uid_t = getpwnam("nobody")?.pointee.pw_uid ?? 65_534
        #expect(chown(dir.url.appendingPathComponent(earlier[0]).path, nobody, gid_t(nobody)) == 0)

        let fresh = try Self.setGarbageAside(in: dir, known: Set(earlier + ["data.mdb", "lock.mdb"]))

        let names = Set(try FileManager.default.contentsOfDirectory(atPath: dir.path))
        #expect(
            names.intersection(earlier + [fresh]) == Set([earlier[0]] + earlier.suffix(Self.kept - 1) + [fresh]),
            "\(names.sorted())")
    }
    @Test("set-aside names: whole seconds, never a trap; only a name of exactly that form is one")
    func names() {
        #expect(SetAsideFiles.name(at: Date(timeIntervalSince1970: 1_700_000_000.9)) == "data.mdb.damaged-1700000000")
        #expect(SetAsideFiles.name(at: Date(timeIntervalSince1970: -5)) == "data.mdb.damaged-0")
        #expect(SetAsideFiles.name(at: Date(timeIntervalSince1970: 1e300)) == "data.mdb.damaged-\(Int64.max)")
        #expect(SetAsideFiles.name(at: Date(timeIntervalSince1970: .nan)) == "data.mdb.damaged-0")
        let time = { (name: String) in SetAsideFiles.time(inName: Array(name.utf8)) }
        #expect(time("data.mdb.damaged-1700000000") == 1_700_000_000)
        #expect(time("data.mdb.damaged-0") == 0)
        #expect(time("data.mdb.damaged-\(Int64.max)") == Int64.max)
        for name in [
            "data.mdb.damaged-", "data.mdb.damaged-07", "data.mdb.damaged--1", "data.mdb.damaged-+1",
            "data.mdb.damaged-1 ", "data.mdb.damaged-1.bak", "data.mdb.damaged-9223372036854775808",
            "data.mdb.damaged-\u{0663}", "xdata.mdb.damaged-1", "data.mdb",
        ] {
            #expect(time(name) == nil, "\(name.debugDescription)")
        }
    }

    @Test("the file just set aside is kept even when older ones carry later times (the clock went back)")
    func justSetAsideAlwaysKept() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let earlier = try Self.writeEarlierSetAsides(in: dir)
        let justSetAside = "data.mdb.damaged-5"
        try Data([5]).write(to: dir.url.appendingPathComponent(justSetAside))
        let removed = SetAsideFiles.removeOld(
            in: try StoreDirectory(path: dir.path, existing: true), keeping: justSetAside, logger: CapturedLog().logger)
        #expect(removed == Array(earlier.prefix(3)), "oldest first")
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: dir.path))
        #expect(names == Set(earlier.suffix(Self.kept - 1) + [justSetAside]))
        #expect(SetAsideFiles.kept == Self.kept, "the documented number")
    }
}

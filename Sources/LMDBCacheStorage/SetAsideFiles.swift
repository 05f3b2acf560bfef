import Foundation
import Glibc
import Logging

/// The damaged data files a directory keeps: a store found damaged on open is renamed
/// `data.mdb.damaged-<unix time>` (``DamagedStorePolicy/recreate``), and each time one is set aside
/// the older ones past the newest ``kept`` are removed, so repeated damage cannot fill the disk.
///
/// Only the effective user's own files count: a directory entry is a set-aside file when its name is
/// exactly `data.mdb.damaged-` and the decimal seconds ``name(at:)`` writes (no sign, no leading
/// zero, no suffix), it is a regular file (a symbolic link, a directory or anything else is left
/// alone), and it belongs to the effective user. Removal is `unlinkat` relative to the directory,
/// which removes a name and never follows a link: an entry swapped for a link after it was checked
/// loses the link, never the link's target.
package enum SetAsideFiles {
    /// How many set-aside files a directory keeps, the one just set aside included: 3. The others
    /// kept are the newest by the time in their names.
    package static let kept = 3

    /// What every set-aside file's name starts with.
    package static let prefix = StoreFiles.data + ".damaged-"

    /// The name a data file found damaged at `date` is set aside under: ``prefix`` and the whole
    /// seconds since 1970 (0 for an earlier or unrepresentable time; never a trap).
    package static func name(at date: Date) -> String {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        let whole: Int64 = seconds >= 1 ? Int64(exactly: seconds) ?? .max : 0
        return prefix + String(whole)
    }

    /// The time in `name` when it is exactly a name ``name(at:)`` writes, else nil.
    package static func time(inName name: [UInt8]) -> Int64? {
        let prefixBytes = Array(prefix.utf8)
        guard name.count > prefixBytes.count, name.starts(with: prefixBytes) else { return nil }
        let digits = name[prefixBytes.count...]
        guard digits.count <= 19, digits.first != UInt8(ascii: "0") || digits.count == 1 else { return nil }
        var value: Int64 = 0
        for digit in digits {
            guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { return nil }
            let (shifted, overflowShift) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowAdd) = shifted.addingReportingOverflow(Int64(digit - UInt8(ascii: "0")))
            guard !overflowShift, !overflowAdd else { return nil }
            value = sum
        }
        return value
    }

    /// Removes the set-aside files in `directory` past the newest ``kept``, always keeping
    /// `justSetAside` (the name of the file just set aside, kept even when the clock went back).
    /// Failures are logged and otherwise ignored: a file left behind is no reason to fail an open.
    ///
    /// - Returns: the names removed, oldest first.
    @discardableResult
    package static func removeOld(in directory: StoreDirectory, keeping justSetAside: String, logger: Logger) -> [String] {
        let descriptor = directory.descriptor
        let keep = Array(justSetAside.utf8)
        var found: [(time: Int64, name: [UInt8])] = []
        for name in entries(descriptor) where name != keep {
            guard let time = time(inName: name) else { continue }
            var info = stat()
            guard withCString(name, { fstatat(descriptor, $0, &info, AT_SYMLINK_NOFOLLOW) }) == 0,
                info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid()
            else { continue }
            found.append((time, name))
        }
        let removable = found.sorted { $0.time > $1.time }.dropFirst(max(0, kept - 1)).reversed()
        var removed: [String] = []
        for (_, name) in removable {
            let shown = String(decoding: name, as: UTF8.self)
            if withCString(name, { unlinkat(descriptor, $0, 0) }) == 0 {
                removed.append(shown)
            } else {
                logger.info(
                    "LMDBCache could not remove an old set-aside store file",
                    metadata: ["path": .escaped(directory.path + "/" + shown), "reason": "\(errnoText())"])
            }
        }
        if !removed.isEmpty {
            logger.info(
                "LMDBCache removed old set-aside store files",
                metadata: ["path": .escaped(directory.path), "removed": "\(removed.count)", "kept": "\(kept)"])
        }
        return removed
    }

    /// Calls `body` with `name` as a NUL-terminated C string (never empty: it holds the NUL).
    private static func withCString<Result>(_ name: [UInt8], _ body: (UnsafePointer<CChar>) -> Result) -> Result {
        (name + [0]).withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) }
        }
    }

    /// The names in the directory open as `descriptor`, as bytes (a name need not be UTF-8).
    private static func entries(_ descriptor: Int32) -> [[UInt8]] {
        // A description of its own, not `dup`: a duplicate shares the directory's reading
        // position, so once one listing reached the end every later one would find nothing.
        let copy = openat(descriptor, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard copy >= 0 else { return [] }
        guard let listing = fdopendir(copy) else {
            close(copy)
            return []
        }
        defer { closedir(listing) }
        var names: [[UInt8]] = []
        while let entry = readdir(listing) {
            names.append(withUnsafeBytes(of: &entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) })
        }
        return names
    }
}

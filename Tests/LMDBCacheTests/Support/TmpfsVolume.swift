import Foundation
import Glibc
import Testing

/// A small tmpfs mounted for one test, so a test can fill a real volume.
struct TmpfsVolume {
    let url: URL
    var path: String { url.path }

    /// Whether this process may mount a tmpfs (root, outside a restricted container).
    static let canMount: Bool = {
        guard let volume = try? TmpfsVolume(megabytes: 1) else { return false }
        volume.unmount()
        return true
    }()

    static let skipReason: Comment = "mounting a tmpfs is not permitted here (needs root and mount rights)"

    init(megabytes: Int) throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("lmdbcache-tmpfs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        guard mount("tmpfs", url.path, "tmpfs", 0, "size=\(megabytes)m") == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: url)
            throw CocoaError(.fileWriteNoPermission, userInfo: [NSLocalizedDescriptionKey: reason])
        }
    }

    /// Bytes available on the volume.
    var available: Int {
        var info = statvfs()
        statvfs(path, &info)
        return Int(info.f_bavail) * Int(info.f_frsize)
    }

    /// Writes a file of `bytes` bytes that takes up space until removed.
    func fill(_ name: String, bytes: Int) throws -> URL {
        let file = url.appendingPathComponent(name)
        try Data(count: bytes).write(to: file)
        return file
    }

    func unmount() {
        umount2(path, Int32(MNT_DETACH))
        try? FileManager.default.removeItem(at: url)
    }
}

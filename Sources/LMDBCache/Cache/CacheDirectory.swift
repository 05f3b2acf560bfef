import Foundation

/// Where named caches live.
enum CacheDirectory {
    /// The directory of the cache called `name`.
    static func named(
        _ name: String, environment: [String: String] = ProcessInfo.processInfo.environment,
        isDirectory: (String) -> Bool = isDirectory
    ) throws -> URL {
        try validate(name)
        return try root(environment, isDirectory: isDirectory).appendingPathComponent(name, isDirectory: true)
    }

    /// `$XDG_CACHE_HOME` when absolute (the XDG spec says to ignore a relative value), else
    /// `$HOME/.cache`, `HOME` unset or empty meaning the account's home directory.
    ///
    /// - Throws: ``CacheError/directoryUnavailable(path:reason:)`` when the home directory is not
    ///   an absolute path: resolved against the working directory, it would put the cache
    ///   wherever the process happened to start; or when it does not exist: a missing home
    ///   (`/nonexistent`, as Debian gives system accounts) is not created, `.cache` in it is.
    static func root(_ environment: [String: String], isDirectory: (String) -> Bool = isDirectory) throws -> URL {
        if let xdg = environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") {
            return URL(fileURLWithPath: xdg, isDirectory: true)
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        guard home.hasPrefix("/") else {
            throw CacheError.directoryUnavailable(
                path: home,
                reason: "HOME is not an absolute path, and a cache directory is never placed relative to the "
                    + "working directory; set HOME or XDG_CACHE_HOME to an absolute path, or open the cache "
                    + "with a directory URL")
        }
        guard isDirectory(home) else {
            throw CacheError.directoryUnavailable(
                path: home,
                reason: "the home directory does not exist, and a cache never creates one; set XDG_CACHE_HOME to "
                    + "an absolute path, or open the cache with a directory URL")
        }
        return URL(fileURLWithPath: home, isDirectory: true).appendingPathComponent(".cache", isDirectory: true)
    }

    /// Whether `path` names a directory (following a symbolic link).
    static func isDirectory(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue
    }

    static func validate(_ name: String) throws {
        let reason: String? =
            if name.isEmpty {
                "a cache name cannot be empty"
            } else if name == "." || name == ".." {
                "a cache name cannot be . or .."
            } else if name.contains("/") {
                "a cache name cannot contain /; pass a directory URL to place a cache elsewhere"
            } else if name.contains("\0") {
                "a cache name cannot contain a NUL character"
            } else {
                nil
            }
        if let reason { throw CacheError.invalidName(name: name, reason: reason) }
    }
}

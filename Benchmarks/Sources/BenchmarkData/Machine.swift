import Foundation

/// The machine a run was made on, printed above the tables and stored in the JSON (cache-bench
/// and disk-bench).
public struct Machine: Codable, Sendable {
    public var cores: Int
    public var architecture: String
    public var cpuModel: String
    public var operatingSystem: String
    public var kernel: String
    public var memory: String
    /// When the run started (ISO 8601, UTC), and whether it was a `--quick` run.
    public var date: String
    public var quick: Bool
    public var swift: String
    public var build: String
    /// CPU steal over the whole run (set when it ends; see ``CPUTimes``).
    public var cpuSteal: String?

    /// This machine now; `quick` records whether the run uses small sizes.
    public static func current(quick: Bool) -> Machine {
        var names = utsname()
        uname(&names)
        let architecture = withUnsafeBytes(of: &names.machine) { bytes in
            String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
        let release = withUnsafeBytes(of: &names.release) { bytes in
            String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
        return Machine(
            cores: ProcessInfo.processInfo.activeProcessorCount,
            architecture: architecture,
            cpuModel: field("model name", in: "/proc/cpuinfo") ?? "unknown",
            operatingSystem: field("PRETTY_NAME", in: "/etc/os-release", separator: "=")?
                .trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                ?? ProcessInfo.processInfo.operatingSystemVersionString,
            kernel: "Linux \(release)",
            memory: field("MemTotal", in: "/proc/meminfo").flatMap { text in
                Int(text.split(separator: " ").first ?? "").map { "\(($0 &+ (1 << 19)) >> 20) GiB" }
            } ?? "unknown",
            date: ISO8601DateFormatter().string(from: Date()),
            quick: quick,
            swift: compilerVersion,
            build: buildConfiguration
        )
    }

    /// The value of the first `name<separator>value` line of a text file.
    private static func field(_ name: String, in path: String, separator: Character = ":") -> String? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: separator, maxSplits: 1)
            if parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == name {
                return parts[1].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }

    /// One line: cores, CPU, memory, OS, kernel, Swift, build, and the run's CPU steal once known.
    public var description: String {
        "\(cores) cores, \(architecture), \(cpuModel), \(memory) RAM, \(operatingSystem), \(kernel), "
            + "\(swift), \(build) build" + (cpuSteal.map { ", CPU steal \($0)" } ?? "")
    }

    /// `debug` or `release`: how the benchmarks were compiled.
    public static var buildConfiguration: String {
        #if DEBUG
        return "debug"
        #else
        return "release"
        #endif
    }

    /// The Swift compiler that built the benchmarks.
    public static var compilerVersion: String {
        #if compiler(>=6.4)
        return "Swift 6.4 or later"
        #elseif compiler(>=6.3)
        return "Swift 6.3"
        #elseif compiler(>=6.2)
        return "Swift 6.2"
        #else
        return "Swift 6.1"
        #endif
    }
}

/// The type of the file system holding `path` (the longest mount point in /proc/self/mounts
/// that contains it), e.g. `ext4`.
public func fileSystemName(_ path: String) -> String {
    let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
    guard let mounts = try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8) else { return "unknown" }
    var best: (point: String, type: String)?
    for line in mounts.split(separator: "\n") {
        let fields = line.split(separator: " ")
        guard fields.count >= 3 else { continue }
        let point = String(fields[1])
        let contains = point == "/" || resolved == point || resolved.hasPrefix(point + "/")
        if contains, point.count >= (best?.point.count ?? -1) { best = (point, String(fields[2])) }
    }
    return best.map { $0.type } ?? "unknown"
}

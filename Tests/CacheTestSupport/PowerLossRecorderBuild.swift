import Foundation

/// Builds the power-loss recorder (`Tests/PowerLoss/record-io.c`, an `LD_PRELOAD` interposer)
/// into a temporary directory with the system's C compiler, for the power-loss tests.
public enum PowerLossRecorderBuild {
    /// The recorder's C source, found beside this file in the checkout.
    static let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("PowerLoss/record-io.c")

    /// The recorder could not be built, or a power-loss run could not go on.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String

        public init(description: String) { self.description = description }
    }

    /// Compiles the recorder into `directory` and returns the shared object's path.
    public static func build(into directory: URL) throws -> String {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let library = directory.appendingPathComponent("power-loss-recorder.so").path
        let compiler = Process()
        compiler.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        compiler.arguments = ["cc", "-shared", "-fPIC", "-O1", "-o", library, source.path, "-ldl", "-lpthread"]
        let errors = Pipe()
        compiler.standardError = errors
        try compiler.run()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        compiler.waitUntilExit()
        guard compiler.terminationStatus == 0 else {
            throw Failure(description: "cc failed building the power-loss recorder: \(message)")
        }
        return library
    }
}

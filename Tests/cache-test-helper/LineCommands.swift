import Foundation

/// The line protocol of the helper's long-running commands (`serve`, `node`): one command a line
/// on stdin, its words single tokens, one answer line on stdout.
enum LineCommands {
    /// Reads stdin until its end, handing each line's command (its first word) and operands (the
    /// rest) to `handle` with the line itself; an empty line is answered with an error.
    static func read(_ handle: (_ command: String, _ operands: [String], _ line: String) -> Void) {
        while let line = readLine() {
            let words = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            guard let command = words.first else {
                answer("error empty command")
                continue
            }
            handle(command, Array(words.dropFirst()), line)
        }
    }

    /// Writes one answer line.
    static func answer(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}

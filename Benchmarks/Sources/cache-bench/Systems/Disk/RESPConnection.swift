import Foundation

/// One connection speaking RESP (the Redis serialization protocol) over a plain socket, TCP on
/// loopback or a Unix domain socket: commands go out as arrays of bulk strings, replies are
/// parsed from a read buffer. Only what the benchmark needs: simple strings, errors, integers and
/// bulk strings.
final class RESPConnection {
    private let descriptor: Int32
    private var output: [UInt8] = []
    private var input = [UInt8](repeating: 0, count: 1 << 16)
    private var inputStart = 0
    private var inputEnd = 0

    /// Connects to 127.0.0.1:`port` with Nagle's algorithm off.
    init(port: UInt16) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXFailure("socket") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        // On a throw from here on, every property is set, so deinit runs and closes the socket:
        // closing it here too would close whatever descriptor took its number meanwhile (an
        // event loop's new socket: a crash the fleet suite's "killed" fault once showed).
        guard connected else { throw POSIXFailure("connect 127.0.0.1:\(port)") }
        var on: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Makes a send or a receive that waits longer than `milliseconds` fail (`SO_SNDTIMEO`,
    /// `SO_RCVTIMEO`); the connection is then not to be used again (a late reply would follow).
    func setTimeout(milliseconds: Int) throws {
        var limit = timeval(tv_sec: milliseconds / 1_000, tv_usec: (milliseconds % 1_000) * 1_000)
        let size = socklen_t(MemoryLayout<timeval>.size)
        guard setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &limit, size) == 0,
            setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &limit, size) == 0
        else { throw POSIXFailure("setsockopt SO_RCVTIMEO") }
    }

    /// The longest socket path `sockaddr_un` holds: `sun_path` less its terminating NUL
    /// (107 bytes on Linux).
    static let maximumUnixPathBytes = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// Connects to the Unix domain socket at `path`. A path longer than ``maximumUnixPathBytes``
    /// (or holding a NUL) is a thrown error: the kernel would read only a cut-off name.
    init(unixSocketPath path: String) throws {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, !bytes.contains(0) else {
            throw RedisFailure(description: "the socket path \(path.debugDescription) is empty or holds a NUL byte")
        }
        guard bytes.count <= Self.maximumUnixPathBytes else {
            throw RedisFailure(
                description: "the socket path \(path) (\(bytes.count) bytes) does not fit sockaddr_un's "
                    + "\(Self.maximumUnixPathBytes)-byte sun_path")
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { sunPath in
            sunPath.copyBytes(from: bytes)
            sunPath[bytes.count] = 0
        }
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXFailure("socket(AF_UNIX)") }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count + 1)
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, length) == 0 }
        }
        // deinit closes the socket (as in ``init(port:)``).
        guard connected else { throw POSIXFailure("connect \(path)") }
    }

    deinit { if descriptor >= 0 { _ = Glibc.close(descriptor) } }

    // MARK: Commands

    /// Queues a command (an array of bulk strings) without sending it.
    func append(_ arguments: [UInt8]...) {
        append(contentsOf: arguments)
    }

    /// Queues a command of `arguments` without sending it.
    func append(contentsOf arguments: [[UInt8]]) {
        output.append(UInt8(ascii: "*"))
        output += Array(String(arguments.count).utf8)
        output += [13, 10]
        for argument in arguments {
            output.append(UInt8(ascii: "$"))
            output += Array(String(argument.count).utf8)
            output += [13, 10]
            output += argument
            output += [13, 10]
        }
    }

    /// Sends every queued command.
    func send() throws {
        try output.withUnsafeBytes { bytes in
            var done = 0
            while done < bytes.count {
                let sent = Glibc.send(descriptor, bytes.baseAddress! + done, bytes.count - done, Int32(MSG_NOSIGNAL))
                guard sent > 0 else { throw POSIXFailure("send") }
                done += sent
            }
        }
        output.removeAll(keepingCapacity: true)
    }

    /// PING answered with PONG.
    func ping() throws -> Bool {
        append(Array("PING".utf8))
        try send()
        return try readSimple() == "PONG"
    }

    // MARK: Replies

    /// A simple-string or integer reply's text; throws on an error reply.
    @discardableResult
    func readSimple() throws -> String {
        let line = try readLine()
        guard let kind = line.first else { throw RedisFailure(description: "empty reply") }
        let text = String(decoding: line.dropFirst(), as: UTF8.self)
        switch kind {
        case UInt8(ascii: "+"), UInt8(ascii: ":"): return text
        case UInt8(ascii: "-"): throw RedisFailure(description: text, isErrorReply: true)
        default: throw RedisFailure(description: "unexpected reply \(String(decoding: line, as: UTF8.self))")
        }
    }

    /// A bulk-string reply: its bytes, or nil for the null bulk string (a missing key).
    func readBulk() throws -> [UInt8]? {
        let line = try readLine()
        guard line.first == UInt8(ascii: "$"), let length = Int(String(decoding: line.dropFirst(), as: UTF8.self))
        else {
            if line.first == UInt8(ascii: "-") {
                throw RedisFailure(description: String(decoding: line.dropFirst(), as: UTF8.self), isErrorReply: true)
            }
            throw RedisFailure(description: "unexpected reply \(String(decoding: line, as: UTF8.self))")
        }
        if length < 0 { return nil }
        let value = try readBytes(length)
        _ = try readBytes(2)  // CRLF
        return value
    }

    /// The next line, without its CRLF.
    private func readLine() throws -> ArraySlice<UInt8> {
        var scanned = inputStart
        while true {
            while scanned + 1 < inputEnd {
                if input[scanned] == 13 && input[scanned + 1] == 10 {
                    let line = input[inputStart..<scanned]
                    inputStart = scanned + 2
                    return line
                }
                scanned += 1
            }
            let offset = inputStart
            try fill()
            scanned -= offset - inputStart
        }
    }

    private func readBytes(_ count: Int) throws -> [UInt8] {
        while inputEnd - inputStart < count { try fill() }
        let bytes = Array(input[inputStart..<inputStart + count])
        inputStart += count
        return bytes
    }

    /// Moves unread bytes to the front (growing the buffer if it is full) and reads more.
    private func fill() throws {
        if inputStart > 0 {
            input.withUnsafeMutableBytes { buffer in
                let base = buffer.baseAddress!
                memmove(base, base + inputStart, inputEnd - inputStart)
            }
            inputEnd -= inputStart
            inputStart = 0
        }
        if inputEnd == input.count { input += [UInt8](repeating: 0, count: input.count) }
        let got = input.withUnsafeMutableBytes { buffer in
            recv(descriptor, buffer.baseAddress! + inputEnd, buffer.count - inputEnd, 0)
        }
        guard got > 0 else { throw RedisFailure(description: got == 0 ? "connection closed" : "recv failed") }
        inputEnd += got
    }
}

#if Redis
/// Why an exchange with Redis failed. Error replies (`-ERR …`) are not errors of the client: they
/// come back as `RESPValue.error` values.
enum RedisClientError: Error, Sendable, Equatable {
    /// No connection could be made: the endpoint and the reason (refused, unreachable, TLS
    /// handshake, connect timeout, or backing off after such a failure).
    case connectFailed(String)
    /// No complete reply came within the timeout; the connection was closed, as its reply stream
    /// is no longer in step with its commands.
    case timedOut
    /// The connection closed with replies outstanding (the server died, restarted or hung up).
    case connectionClosed
    /// The server sent bytes that are not RESP, exceed the parser's limits, or answer nothing
    /// asked; the connection was closed.
    case protocolViolation(String)
    /// `AUTH` (or `HELLO`) was refused: the server's error text.
    case authenticationFailed(String)
    /// The client was closed by its owner.
    case closed
    /// The cluster cannot serve the command: no node reachable, the slot not covered, or too many
    /// redirections.
    case clusterDown(String)
}
#endif

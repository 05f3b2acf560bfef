#if Redis
import RESP

/// Runs commands against Redis: a connection pool to one server, or a cluster router.
///
/// The tier talks to Redis only through this protocol, so a maintained client can replace the
/// small one in this folder.
protocol RedisExecutor: Sendable {
    /// Sends `commands` as one pipeline and returns their replies in order. Error replies are
    /// values (`.error`), not throws. Throws ``RedisClientError`` when the exchange fails (connect
    /// failure, timeout after `timeout`, connection closed, protocol violation); a failed pipeline
    /// may have been partly executed.
    func execute(_ commands: [RedisCommand], timeout: Duration) async throws -> [RESPValue]
    /// The executors of every primary, for the commands that must run on each (`SCAN`): a single
    /// server's pool is its own.
    func everyPrimary() async throws -> [any RedisExecutor]
    /// Closes every connection; later calls throw ``RedisClientError/closed``.
    func close() async
}
#endif

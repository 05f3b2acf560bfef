#if Redis
import NIOCore
import RESP

/// What ``RedisReplyHandler`` writes: a pipeline's encoded commands and the promise of their replies.
struct RedisRequest: Sendable {
    /// The commands, encoded back to back.
    var bytes: ByteBuffer
    /// How many replies answer them (one per command).
    var replyCount: Int
    /// Completed with the `replyCount` replies in order; nil for commands whose replies arrive as
    /// unsolicited values (`SUBSCRIBE`).
    var promise: EventLoopPromise<[RESPValue]>?
}

/// The channel handler of one Redis connection: writes pipelines, parses the reply stream and hands
/// replies to the pipelines' promises in the order the pipelines were written (Redis answers a
/// connection's commands in order).
///
/// A RESP3 push frame (`>`) answers no command: it goes to `onUnsolicited`, as does, when there is
/// such a callback, any value arriving while no reply is awaited (RESP2 pub/sub messages). Without
/// the callback such a value is a protocol violation. Bytes that do not parse close the connection;
/// a closing connection fails every awaited pipeline with ``RedisClientError/connectionClosed``.
final class RedisReplyHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = RedisRequest
    typealias OutboundOut = ByteBuffer

    private struct Pending {
        var promise: EventLoopPromise<[RESPValue]>
        var remaining: Int
        var replies: [RESPValue]
    }

    private var parser: RESPParser
    private var pending = CircularBuffer<Pending>()
    private let onUnsolicited: (@Sendable (RESPValue) -> Void)?
    private let onError: @Sendable (any Error) -> Void

    /// A handler parsing within `limits`, handing push frames and unmatched values to
    /// `onUnsolicited` (nil: unmatched values are a protocol violation), and reporting the first
    /// error of the channel (TLS, I/O, protocol) to `onError` before closing it.
    init(
        limits: RESPParser.Limits, onUnsolicited: (@Sendable (RESPValue) -> Void)?,
        onError: @escaping @Sendable (any Error) -> Void
    ) {
        self.parser = RESPParser(limits: limits)
        self.onUnsolicited = onUnsolicited
        self.onError = onError
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = unwrapOutboundIn(data)
        if let replies = request.promise {
            if request.replyCount > 0 {
                var storage: [RESPValue] = []
                storage.reserveCapacity(request.replyCount)
                pending.append(Pending(promise: replies, remaining: request.replyCount, replies: storage))
            } else {
                replies.succeed([])
            }
        }
        context.write(wrapOutboundOut(request.bytes), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        parser.append(buffer.readableBytesView)
        do {
            while let value = try parser.next() {
                guard deliver(value) else {
                    fail(context: context, error: RedisClientError.protocolViolation("a reply that answers no command"))
                    return
                }
            }
        } catch {
            fail(context: context, error: RedisClientError.protocolViolation(error.description))
        }
    }

    /// Hands `value` to the oldest awaiting pipeline or to `onUnsolicited`; false if neither takes it.
    private func deliver(_ value: RESPValue) -> Bool {
        if case .push = value {
            onUnsolicited?(value)
            return true
        }
        guard !pending.isEmpty else {
            guard let onUnsolicited else { return false }
            onUnsolicited(value)
            return true
        }
        let index = pending.startIndex
        pending[index].replies.append(value)
        pending[index].remaining -= 1
        if pending[index].remaining == 0 {
            let done = pending.removeFirst()
            done.promise.succeed(done.replies)
        }
        return true
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(context: context, error: error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        failPending(RedisClientError.connectionClosed)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        failPending(RedisClientError.connectionClosed)
    }

    private func fail(context: ChannelHandlerContext, error: any Error) {
        onError(error)
        let clientError = error as? RedisClientError ?? .connectionClosed
        failPending(clientError)
        context.close(promise: nil)
    }

    private func failPending(_ error: RedisClientError) {
        while let entry = pending.popFirst() { entry.promise.fail(error) }
    }
}
#endif

import Dispatch
import Foundation
import Testing

@testable import LMDBCacheStorage

@Suite("Writer thread: a caller in the writer's place")
struct WriterThreadTests {
    @Test("an idle writer lets the caller run the job on its own thread, counted as the writer")
    func runsHereWhenIdle() throws {
        let writer = WriterThread(name: "test.writer")
        defer { writer.stop() }
        let caller = pthread_self()
        let result = writer.runHereIfIdle { () -> Bool in
            pthread_equal(pthread_self(), caller) != 0 && writer.isCurrent
        }
        #expect(result == true)
        #expect(!writer.isCurrent, "the caller is the writer only while its job runs")
    }

    @Test("a busy writer refuses, and jobs queued while a caller stands in wait for it")
    func exclusiveWithTheWriter() throws {
        let writer = WriterThread(name: "test.writer")
        defer { writer.stop() }
        // The writer busy: a job holds it until released.
        let release = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        writer.async {
            started.signal()
            release.wait()
        }
        started.wait()
        #expect(writer.runHereIfIdle { 1 } == nil, "the writer is running a job")
        release.signal()
        try writer.sync {}  // the writer idle again

        // A caller stands in; a job queued meanwhile runs only after it returns.
        let order = Locked<[String]>([])
        let inside = DispatchSemaphore(value: 0)
        let leave = DispatchSemaphore(value: 0)
        let standIn = Thread {
            // The writer turns idle just after its last job signals; until then it refuses.
            var ran: Void?
            while ran == nil {
                ran = writer.runHereIfIdle { () -> Void in
                    inside.signal()
                    leave.wait()
                    order.withLock { $0.append("stand-in") }
                }
            }
        }
        standIn.start()
        inside.wait()
        #expect(writer.runHereIfIdle { 2 } == nil, "one stand-in at a time")
        let queuedDone = DispatchSemaphore(value: 0)
        writer.async {
            order.withLock { $0.append("queued") }
            queuedDone.signal()
        }
        leave.signal()
        queuedDone.wait()
        #expect(order.withLock { $0 } == ["stand-in", "queued"])
    }
}

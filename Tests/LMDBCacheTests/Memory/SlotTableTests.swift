import Testing

@testable import LMDBCache

@Suite("Memory tier: hash index")
struct SlotTableTests {
    @Test("random inserts and removals, with colliding tags, agree with a dictionary")
    func agreesWithDictionary() {
        var table = SlotTable()
        var model: [Int32: UInt32] = [:]
        var generator = SystemRandomNumberGenerator()
        for step in 0..<20_000 {
            let node = Int32.random(in: 0..<2_000, using: &generator)
            // Few distinct tags, so clusters and backward shifts are exercised.
            let tag = UInt32.random(in: 0..<64, using: &generator) &* 0x9E37
            if let existing = model[node] {
                table.remove(tag: existing, node: node)
                model[node] = nil
            } else {
                table.insert(tag: tag, node: node)
                model[node] = tag
            }
            if step % 500 == 0 {
                for (node, tag) in model {
                    #expect(table.find(tag: tag) { $0 == node } == node)
                }
            }
        }
        #expect(table.count == model.count)
        for (node, tag) in model {
            #expect(table.find(tag: tag) { $0 == node } == node)
            #expect(table.find(tag: tag &+ 1) { $0 == node } == nil)
        }
    }
}

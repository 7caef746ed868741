import Testing

@testable import KVOServer

/// `StreamTickets` on the server's clock (milliseconds given, never read): single use, the 30 s lifetime, and the
/// per-user and total bounds with expired tickets making room.
@Suite struct StreamTicketsTests {
    @Test("a ticket names its user once, until its lifetime ends")
    func singleUseWithinItsLifetime() throws {
        var tickets = StreamTickets()
        let issuedAda = tickets.issue(for: "ada", now: 1_000)
        let issuedOpen = tickets.issue(for: nil, now: 1_000)
        let ada = try #require(issuedAda)
        let open = try #require(issuedOpen)
        #expect(ada != open && ada.hasPrefix("kvodt_") && ada.count == 6 + 48)
        let first = tickets.redeem(ada, now: 30_999)
        let again = tickets.redeem(ada, now: 30_999)
        let late = tickets.redeem(open, now: 31_000)
        let unknown = tickets.redeem("kvodt_unknown", now: 1_000)
        #expect(first == .some("ada"))
        #expect(again == nil, "used up")
        #expect(late == nil, "expired at exactly 30 s")
        #expect(unknown == nil)
    }

    @Test("100 outstanding per user; expired or used ones make room; other users are not affected")
    func boundedPerUser() throws {
        var tickets = StreamTickets()
        var issued: [String] = []
        for _ in 0..<StreamTickets.capacityPerUser {
            let ticket = tickets.issue(for: "ada", now: 0)
            issued.append(try #require(ticket))
        }
        let over = tickets.issue(for: "ada", now: 1)
        let bob = tickets.issue(for: "bob", now: 1)
        #expect(over == nil && bob != nil)
        _ = tickets.redeem(issued[0], now: 2)
        let afterUse = tickets.issue(for: "ada", now: 3)
        let overAgain = tickets.issue(for: "ada", now: 4)
        #expect(afterUse != nil && overAgain == nil, "a used one makes room, one")
        let afterExpiry = tickets.issue(for: "ada", now: 30_000)
        #expect(afterExpiry != nil, "the first 99 expired at 30 s")
    }
}

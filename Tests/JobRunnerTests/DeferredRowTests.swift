import Foundation
import PostgresBackend
import PostgresNIO
import PostgresTesting
import Testing

/// Rows added with `insertDeferred` (a group commit's steps each adding one) go to the
/// server as one INSERT per run of rows for the same table, before whatever the
/// transaction does next, and fail the transaction as any write would.
struct DeferredRowTests {
    /// A table that counts the INSERT statements run on it (a statement-level trigger).
    private func makeTables(_ store: PostgresStore) async throws {
        try await store.write { tx in
            try tx.execute("CREATE TABLE rows_a (n int8 NOT NULL, label text, at timestamptz)")
            try tx.execute("CREATE TABLE rows_b (n int8 NOT NULL)")
            try tx.execute("CREATE TABLE statements (name text)")
            try tx.execute("""
                CREATE FUNCTION count_statement() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN INSERT INTO statements VALUES (TG_TABLE_NAME); RETURN NULL; END $$
                """)
            try tx.execute("CREATE TRIGGER rows_a_statements AFTER INSERT ON rows_a FOR EACH STATEMENT EXECUTE FUNCTION count_statement()")
            try tx.execute("CREATE TRIGGER rows_b_statements AFTER INSERT ON rows_b FOR EACH STATEMENT EXECUTE FUNCTION count_statement()")
        }
    }

    private func addA(_ tx: PostgresTransaction, _ n: Int64, label: String? = nil) {
        tx.insertDeferred(into: "rows_a", columns: ["n", "label", "at"]) { row in
            row.append(n)
            row.append(label)
            row.append(Date(timeIntervalSince1970: 1_767_225_600))
        }
    }

    private func statements(_ store: PostgresStore) async throws -> [String] {
        try await store.read { tx in try tx.query("SELECT name FROM statements").map { try $0.decode(String.self) } }
    }

    @Test func rowsForOneTableGoAsOneStatementBeforeTheNextOne() async throws {
        let store = try await ThrowawayPostgres.makeStore()
        try await makeTables(store)
        let seen = try await store.write { tx in
            for n in 1...50 { addA(tx, Int64(n), label: n % 2 == 0 ? "even" : nil) }
            // A statement that reads them: the rows were sent ahead of it.
            let seen = try tx.query("SELECT count(*), count(label), sum(n)::int8 FROM rows_a").first!.decode((Int64, Int64, Int64).self)
            for n in 51...60 { addA(tx, Int64(n)) }
            tx.insertDeferred(into: "rows_b", columns: ["n"]) { $0.append(Int64(1)) }
            addA(tx, 61)
            return seen
        }
        #expect(seen.0 == 50 && seen.1 == 25 && seen.2 == 1_275)
        let rows = try await store.read { tx in try tx.query("SELECT n FROM rows_a ORDER BY n").map { try $0.decode(Int64.self) } }
        #expect(rows == Array(1...61))
        // 1-50, then 51-60, rows_b's row, and 61 on its own: in order, one statement per run.
        #expect(try await statements(store) == ["rows_a", "rows_a", "rows_b", "rows_a"])
    }

    @Test func moreRowsThanOneStatementTakesGoInSeveral() async throws {
        let store = try await ThrowawayPostgres.makeStore()
        try await makeTables(store)
        // Three binds a row: 65,535 binds hold 21,845 rows.
        try await store.write { tx in for n in 1...30_000 { addA(tx, Int64(n)) } }
        #expect(try await store.read { tx in try tx.query("SELECT count(DISTINCT n) FROM rows_a").first!.decode(Int64.self) } == 30_000)
        #expect(try await statements(store) == ["rows_a", "rows_a"])
    }

    @Test func aRowThatCannotBeStoredFailsTheWholeTransaction() async throws {
        let store = try await ThrowawayPostgres.makeStore()
        try await makeTables(store)
        await #expect(throws: PostgresStoreError.self) {
            try await store.write { tx in
                try tx.execute("INSERT INTO rows_b VALUES (7)")
                self.addA(tx, 1)
                // NOT NULL: refused by the server, at the commit.
                tx.insertDeferred(into: "rows_a", columns: ["n", "label", "at"]) { row in
                    row.append(Int64?.none)
                    row.append("bad")
                    row.append(Date())
                }
            }
        }
        let counts = try await store.read { tx in
            try tx.query("SELECT (SELECT count(*) FROM rows_a), (SELECT count(*) FROM rows_b)").first!.decode((Int64, Int64).self)
        }
        #expect(counts == (0, 0))
    }
}

// Package pgkit holds the PostgreSQL texts the tests of several packages share (pkg/rows, cmd). Only tests import
// it; it imports nothing of jobsched's, so that pkg/rows' own tests can.
package pgkit

// EscapingQueries are source.query texts that try to leave jobsched's READ ONLY transaction and write to table
// audit of schema (which the caller's role may write), each in another way of ending or changing a transaction.
// pkg/rows runs them through every call of the source, cmd through dry-run, status and tick.
func EscapingQueries(schema string) map[string]string {
	ins := "INSERT INTO " + schema + ".audit VALUES ('escaped')"
	// The first part closes jobsched's wrapper, the last reopens it, so that the whole text parses.
	wrap := func(middle string) string {
		return "SELECT id FROM " + schema + ".tasks) AS x; " + middle + "; SELECT * FROM (SELECT id FROM " + schema + ".tasks"
	}
	return map[string]string{
		"COMMIT":                    wrap("COMMIT; " + ins),
		"END":                       wrap("END; " + ins),
		"ROLLBACK":                  wrap("ROLLBACK; " + ins),
		"ABORT":                     wrap("ABORT; " + ins),
		"COMMIT AND CHAIN":          wrap("COMMIT AND CHAIN; SET TRANSACTION READ WRITE; " + ins),
		"SET TRANSACTION":           wrap("SET TRANSACTION READ WRITE; " + ins),
		"COMMIT, SET TRANSACTION":   wrap("COMMIT; SET TRANSACTION READ WRITE; " + ins),
		"SET SESSION":               wrap("COMMIT; SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE; " + ins),
		"BEGIN READ WRITE":          wrap("ROLLBACK; BEGIN READ WRITE; " + ins + "; COMMIT"),
		"DO block after COMMIT":     wrap("COMMIT; DO $$BEGIN " + ins + "; END$$"),
		"DO block that commits":     wrap("DO $$BEGIN COMMIT; " + ins + "; END$$"),
		"DO block as the query":     "DO $$BEGIN " + ins + "; END$$",
		"set_config read write":     "SELECT id FROM " + schema + ".tasks WHERE set_config('transaction_read_only', 'off', true) IS NOT NULL",
		"COMMIT, no closing reopen": "SELECT id FROM " + schema + ".tasks) AS x; COMMIT; " + ins + "; SELECT (1",
	}
}

package querydoctor

import (
	"fmt"
	"strings"

	"github.com/lib/pq"
)

// Access is what the configured role may do beyond reading, as the source found it in the catalogs. READ ONLY stops
// every write of jobsched's own transaction, whatever the role, and jobsched rolls it back; it does not stop what a
// function the query calls does elsewhere: dblink_exec opens a connection of its own, with the credentials in the
// query's text, and writes there; pg_logical_emit_message(false, ...) writes a WAL message that logical decoding
// delivers although the transaction rolls back; a superuser's functions write server files or end other sessions. A
// role that may only SELECT, and may not execute those functions, is the check.
type Access struct {
	Role      string
	Superuser bool
	// Roles are the roles that can write which Role is a member of (pg_write_all_data, ...).
	Roles []string
	// Tables are the tables the read's plan reads on which Role holds a privilege beyond SELECT.
	Tables []TableAccess
	// Functions are the built-in functions of OutsideFunctions Role may execute (PUBLIC may, by default), by effect.
	Functions []FunctionAccess
	// Extensions are the installed extensions of ConnectingExtensions whose functions Role may call.
	Extensions []string
}

// FunctionAccess is one effect of OutsideFunctions and the functions with it Role may execute.
type FunctionAccess struct {
	Effect    string
	Functions []string // as regprocedure prints them: pg_logical_emit_message(boolean,text,text)
}

// OutsideFunction is a built-in function whose effect stays when jobsched's READ ONLY transaction rolls back, known by
// its C symbol (pg_proc.prosrc of a LANGUAGE internal function), so that the same code under another name is found
// too. A test checks each symbol against pg_proc of the PostgreSQL the tests run.
type OutsideFunction struct {
	Symbol, Effect string
	// Replication: the function itself refuses a role without the REPLICATION attribute.
	Replication bool
}

// The effects of OutsideFunctions, each one warning.
const (
	EffectWAL    = "writes a WAL message that logical decoding (an outbox consumer) acts on although the transaction rolls back"
	EffectSignal = "cancels or ends other sessions of the role (any session, as a member of pg_signal_backend)"
	EffectSlot   = "creates, drops, copies or advances replication slots, which hold WAL until they are dropped"
)

// OutsideFunctions are the built-in functions PUBLIC may execute on PostgreSQL 15 whose effect outlives the READ
// ONLY transaction. Writes that READ ONLY or the rollback stops (nextval, lo_create, pg_notify) and effects that end
// with jobsched's session (advisory locks, set_config) are not here.
var OutsideFunctions = []OutsideFunction{
	{Symbol: "pg_logical_emit_message_text", Effect: EffectWAL},
	{Symbol: "pg_logical_emit_message_bytea", Effect: EffectWAL},
	{Symbol: "pg_cancel_backend", Effect: EffectSignal},
	{Symbol: "pg_terminate_backend", Effect: EffectSignal},
	{Symbol: "pg_create_physical_replication_slot", Effect: EffectSlot, Replication: true},
	{Symbol: "pg_create_logical_replication_slot", Effect: EffectSlot, Replication: true},
	{Symbol: "pg_drop_replication_slot", Effect: EffectSlot, Replication: true},
	{Symbol: "pg_replication_slot_advance", Effect: EffectSlot, Replication: true},
	{Symbol: "pg_logical_slot_get_changes", Effect: EffectSlot, Replication: true},
	{Symbol: "pg_logical_slot_get_binary_changes", Effect: EffectSlot, Replication: true},
	{Symbol: "pg_copy_physical_replication_slot_a", Effect: EffectSlot, Replication: true},
	{Symbol: "pg_copy_physical_replication_slot_b", Effect: EffectSlot, Replication: true},
	{Symbol: "pg_copy_logical_replication_slot_a", Effect: EffectSlot, Replication: true},
	{Symbol: "pg_copy_logical_replication_slot_b", Effect: EffectSlot, Replication: true},
	{Symbol: "pg_copy_logical_replication_slot_c", Effect: EffectSlot, Replication: true},
}

// OutsideSymbols are the symbols of OutsideFunctions, and of those the function refuses without REPLICATION.
func OutsideSymbols() (all, replication []string) {
	for _, f := range OutsideFunctions {
		all = append(all, f.Symbol)
		if f.Replication {
			replication = append(replication, f.Symbol)
		}
	}
	return all, replication
}

// OutsideEffect is the effect of the function with symbol sym ("" when it is not one of OutsideFunctions).
func OutsideEffect(sym string) string {
	for _, f := range OutsideFunctions {
		if f.Symbol == sym {
			return f.Effect
		}
	}
	return ""
}

// TableAccess is a table and the privileges beyond SELECT the role holds on it.
type TableAccess struct {
	Table      string   // schema.name, quoted where SQL needs it
	Privileges []string // INSERT, UPDATE, DELETE, TRUNCATE
}

// WritingRoles are the predefined roles whose members can write whatever the tables' grants say.
var WritingRoles = []string{"pg_write_all_data", "pg_write_server_files", "pg_execute_server_program"}

// ConnectingExtensions are the extensions whose functions act outside the transaction that calls them: they open
// connections to other servers or this one again (dblink, postgres_fdw), send HTTP requests (http) or run SQL in a
// worker of their own (pg_background).
var ConnectingExtensions = []string{"dblink", "http", "pg_background", "postgres_fdw"}

// Warning is something the role may do that READ ONLY does not cover, with the fix.
type Warning struct {
	// Kind is "superuser", "member" (of a role that can write), "privilege" (on a table the query reads), "function"
	// (a built-in one of OutsideFunctions) or "extension" (one of ConnectingExtensions).
	Kind    string `json:"kind"`
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

// Warnings says what a has that a SELECT-only role would not: nothing for a role that may only read.
func (a Access) Warnings() []Warning {
	var out []Warning
	role := pq.QuoteIdentifier(a.Role)
	if a.Superuser {
		out = append(out, Warning{Kind: "superuser",
			Message: fmt.Sprintf("role %s is a superuser: READ ONLY stops writes in jobsched's transaction, not what a "+
				"superuser's functions do outside it (server files, other sessions, dblink)", role),
			Fix: "connect as a role that may only SELECT the query's tables (CREATE ROLE jobsched LOGIN; GRANT SELECT ON ... TO jobsched)"})
	} else {
		for _, r := range a.Roles {
			out = append(out, Warning{Kind: "member", Message: fmt.Sprintf("role %s is a member of %s, which can write", role, r),
				Fix: fmt.Sprintf("REVOKE %s FROM %s", r, role)})
		}
		for _, t := range a.Tables {
			privs := strings.Join(t.Privileges, ", ")
			out = append(out, Warning{Kind: "privilege", Message: fmt.Sprintf("role %s may %s on %s", role, privs, t.Table),
				Fix: fmt.Sprintf("REVOKE %s ON %s FROM %s (or from PUBLIC or the role it has them through)", privs, t.Table, role)})
		}
		for _, f := range a.Functions {
			fns := strings.Join(f.Functions, ", ")
			out = append(out, Warning{Kind: "function",
				Message: fmt.Sprintf("role %s may execute %s, which %s: READ ONLY does not stop it", role, fns, f.Effect),
				Fix:     fmt.Sprintf("REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC (and from %s)", fns, role)})
		}
	}
	for _, e := range a.Extensions {
		out = append(out, Warning{Kind: "extension",
			Message: fmt.Sprintf("extension %s is installed and role %s may call its functions: a query can act with them "+
				"outside the READ ONLY transaction (a connection, a request or a worker of its own) and write there", e, role),
			Fix: fmt.Sprintf("DROP EXTENSION %s where nothing needs it, or REVOKE EXECUTE on its functions FROM PUBLIC "+
				"(and from %s)", e, role)})
	}
	return out
}

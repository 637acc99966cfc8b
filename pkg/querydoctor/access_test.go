package querydoctor

import (
	"reflect"
	"testing"
)

func TestAccessWarnings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		access Access
		want   []Warning
	}{
		{name: "a role that may only SELECT", access: Access{Role: "reader"}, want: nil},
		{name: "a superuser: one warning, not one per table or role",
			access: Access{Role: "postgres", Superuser: true, Roles: []string{"pg_write_all_data"},
				Tables: []TableAccess{{Table: "public.tasks", Privileges: []string{"INSERT"}}}, Extensions: []string{"dblink"},
				Functions: []FunctionAccess{{Effect: EffectSignal, Functions: []string{"pg_cancel_backend(integer)"}}}},
			want: []Warning{
				{Kind: "superuser", Message: `role "postgres" is a superuser: READ ONLY stops writes in jobsched's transaction, ` +
					`not what a superuser's functions do outside it (server files, other sessions, dblink)`,
					Fix: "connect as a role that may only SELECT the query's tables (CREATE ROLE jobsched LOGIN; GRANT SELECT ON ... TO jobsched)"},
				{Kind: "extension", Message: `extension dblink is installed and role "postgres" may call its functions: a query ` +
					`can act with them outside the READ ONLY transaction (a connection, a request or a worker of its own) and write there`,
					Fix: `DROP EXTENSION dblink where nothing needs it, or REVOKE EXECUTE on its functions FROM PUBLIC (and from "postgres")`},
			}},
		{name: "a member of a writing role, with grants beyond SELECT",
			access: Access{Role: "app", Roles: []string{"pg_write_all_data"},
				Tables: []TableAccess{{Table: "public.tasks", Privileges: []string{"INSERT", "UPDATE"}}}},
			want: []Warning{
				{Kind: "member", Message: `role "app" is a member of pg_write_all_data, which can write`, Fix: `REVOKE pg_write_all_data FROM "app"`},
				{Kind: "privilege", Message: `role "app" may INSERT, UPDATE on public.tasks`,
					Fix: `REVOKE INSERT, UPDATE ON public.tasks FROM "app" (or from PUBLIC or the role it has them through)`},
			}},
		{name: "a role that may only SELECT, and execute a function whose effect outlives the transaction",
			access: Access{Role: "reader", Functions: []FunctionAccess{{Effect: EffectWAL,
				Functions: []string{"pg_logical_emit_message(boolean,text,bytea)", "pg_logical_emit_message(boolean,text,text)"}}}},
			want: []Warning{{Kind: "function",
				Message: `role "reader" may execute pg_logical_emit_message(boolean,text,bytea), pg_logical_emit_message(boolean,text,text), ` +
					`which writes a WAL message that logical decoding (an outbox consumer) acts on although the transaction rolls back: READ ONLY does not stop it`,
				Fix: `REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean,text,bytea), pg_logical_emit_message(boolean,text,text) FROM PUBLIC (and from "reader")`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.access.Warnings(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Warnings() =\n%#v\nwant\n%#v", got, tc.want)
			}
		})
	}
}

func TestFindingStringWithWarnings(t *testing.T) {
	f := &Finding{Problems: []Problem{}, Warnings: []Warning{{Kind: "member", Message: "m", Fix: "f"}}}
	if got, want := f.String(), "ok: EXPLAIN shows no whole-table scan or sort in the read; warning: m; fix: f"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	f = &Finding{Unchecked: "u", Warnings: []Warning{{Kind: "member", Message: "m", Fix: "f"}}}
	if got, want := f.String(), "not checked: u; warning: m; fix: f"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

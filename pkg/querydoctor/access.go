package querydoctor

import (
	"fmt"
	"strings"

	"github.com/lib/pq"
)

// Access is what the configured role may do beyond reading, as the source found it in the catalogs. READ ONLY stops
// every write of jobsched's own transaction, whatever the role; it does not stop what a function the query calls does
// elsewhere: dblink_exec opens a connection of its own, with the credentials in the query's text, and writes there;
// a superuser's functions write server files or end other sessions. A role that may only SELECT is the check.
type Access struct {
	Role      string
	Superuser bool
	// Roles are the roles that can write which Role is a member of (pg_write_all_data, ...).
	Roles []string
	// Tables are the tables the read's plan reads on which Role holds a privilege beyond SELECT.
	Tables []TableAccess
	// Extensions are the installed extensions that open connections (dblink, postgres_fdw) whose functions Role may
	// call.
	Extensions []string
}

// TableAccess is a table and the privileges beyond SELECT the role holds on it.
type TableAccess struct {
	Table      string   // schema.name, quoted where SQL needs it
	Privileges []string // INSERT, UPDATE, DELETE, TRUNCATE
}

// WritingRoles are the predefined roles whose members can write whatever the tables' grants say.
var WritingRoles = []string{"pg_write_all_data", "pg_write_server_files", "pg_execute_server_program"}

// ConnectingExtensions are the extensions whose functions open connections to other servers, or this one again.
var ConnectingExtensions = []string{"dblink", "postgres_fdw"}

// Warning is something the role may do that READ ONLY does not cover, with the fix.
type Warning struct {
	// Kind is "superuser", "member" (of a role that can write), "privilege" (on a table the query reads) or
	// "extension" (one that opens connections).
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
	}
	for _, e := range a.Extensions {
		out = append(out, Warning{Kind: "extension",
			Message: fmt.Sprintf("extension %s is installed and role %s may call its functions: a query can open a connection "+
				"of its own with them, outside the READ ONLY transaction, and write there with the credentials in its text", e, role),
			Fix: fmt.Sprintf("DROP EXTENSION %s where nothing needs it, or REVOKE EXECUTE on its functions FROM PUBLIC "+
				"(and from %s)", e, role)})
	}
	return out
}

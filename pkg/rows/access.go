package rows

import (
	"context"
	"database/sql"

	"github.com/lib/pq"

	"github.com/jobsched/jobsched/pkg/querydoctor"
)

// access is what the connected role may do beyond reading (querydoctor.Access), from the catalogs: whether it is a
// superuser, the writing roles it is a member of (MEMBER, not only USAGE: a query may SET ROLE through set_config),
// the built-in functions of querydoctor.OutsideFunctions it may execute (found by their C symbol in any schema, those
// that need REPLICATION only when it has it) and the connecting extensions whose functions it may call. tableAccess
// adds the tables.
func access(ctx context.Context, tx *sql.Tx) (querydoctor.Access, error) {
	var a querydoctor.Access
	err := tx.QueryRowContext(ctx, `SELECT current_user::text, r.rolsuper,
		ARRAY(SELECT w.rolname::text FROM pg_catalog.pg_roles w WHERE w.rolname = ANY($1::text[])
			AND pg_catalog.pg_has_role(current_user, w.oid, 'MEMBER') ORDER BY 1),
		ARRAY(SELECT e.extname::text FROM pg_catalog.pg_extension e WHERE e.extname = ANY($2::text[]) AND EXISTS (
			SELECT 1 FROM pg_catalog.pg_depend d WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
				AND d.refobjid = e.oid AND d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.deptype = 'e'
				AND pg_catalog.has_function_privilege(d.objid, 'EXECUTE')) ORDER BY 1)
		FROM pg_catalog.pg_roles r WHERE r.rolname = current_user`,
		pq.Array(querydoctor.WritingRoles), pq.Array(querydoctor.ConnectingExtensions)).
		Scan(&a.Role, &a.Superuser, pq.Array(&a.Roles), pq.Array(&a.Extensions))
	if err != nil {
		return a, err
	}
	a.Functions, err = outsideFunctions(ctx, tx)
	return a, err
}

// outsideFunctions are the functions of querydoctor.OutsideFunctions the role may execute, by effect in the list's
// order, each effect's functions sorted.
func outsideFunctions(ctx context.Context, tx *sql.Tx) ([]querydoctor.FunctionAccess, error) {
	all, replication := querydoctor.OutsideSymbols()
	rs, err := tx.QueryContext(ctx, `SELECT p.oid::pg_catalog.regprocedure::text, p.prosrc FROM pg_catalog.pg_proc p
		JOIN pg_catalog.pg_language l ON l.oid = p.prolang
		WHERE l.lanname = 'internal' AND p.prosrc = ANY($1::text[]) AND pg_catalog.has_function_privilege(p.oid, 'EXECUTE')
			AND (p.prosrc <> ALL($2::text[]) OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
				WHERE r.rolname = current_user AND (r.rolreplication OR r.rolsuper)))
		ORDER BY 1`, pq.Array(all), pq.Array(replication))
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	byEffect := map[string][]string{}
	for rs.Next() {
		var fn, sym string
		if err := rs.Scan(&fn, &sym); err != nil {
			return nil, err
		}
		e := querydoctor.OutsideEffect(sym)
		byEffect[e] = append(byEffect[e], fn)
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	var out []querydoctor.FunctionAccess
	for _, f := range querydoctor.OutsideFunctions {
		if fns, ok := byEffect[f.Effect]; ok {
			out = append(out, querydoctor.FunctionAccess{Effect: f.Effect, Functions: fns})
			delete(byEffect, f.Effect)
		}
	}
	return out, nil
}

// tableAccess are the tables of the plan on which the role holds a privilege beyond SELECT.
func tableAccess(ctx context.Context, tx *sql.Tx, tables []querydoctor.Table) ([]querydoctor.TableAccess, error) {
	schemas, names := make([]string, len(tables)), make([]string, len(tables))
	for i, t := range tables {
		schemas[i], names[i] = t.Schema, t.Name
	}
	rs, err := tx.QueryContext(ctx, `SELECT pg_catalog.format('%I.%I', t.s, t.n), ARRAY(SELECT p FROM
		unnest(ARRAY['INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) AS p
		WHERE pg_catalog.has_table_privilege(pg_catalog.format('%I.%I', t.s, t.n), p))
		FROM unnest($1::text[], $2::text[]) AS t(s, n)`, pq.Array(schemas), pq.Array(names))
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []querydoctor.TableAccess
	for rs.Next() {
		var ta querydoctor.TableAccess
		if err := rs.Scan(&ta.Table, pq.Array(&ta.Privileges)); err != nil {
			return nil, err
		}
		if len(ta.Privileges) > 0 {
			out = append(out, ta)
		}
	}
	return out, rs.Err()
}

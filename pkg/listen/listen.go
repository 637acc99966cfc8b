// Package listen keeps a fill run's LISTEN on its source.notify channel (lib/pq's pq.Listener, on a connection of
// its own): a notification wakes the run, and so does a change of the connection (lost, or listening again), after
// which the run polls or reads what a notification may have missed. A notification's payload is never read, and
// any number of them while the run is busy is one pending wake: whoever can NOTIFY on the channel can at most make
// passes run sooner.
package listen

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lib/pq"
	"github.com/rs/zerolog"

	"github.com/jobsched/jobsched/pkg/pgdial"
	"github.com/jobsched/jobsched/pkg/pgdsn"
	"github.com/jobsched/jobsched/pkg/rows"
)

// What woke a run: the value of Listener.Wake.
const (
	WokeNotify   = "notify"   // a notification on the channel
	WokeListener = "listener" // the listening connection was lost or re-established
)

// The reconnect backoff of the listening connection (pq.Listener doubles it from the least to the most), and how often
// a listening connection is checked: a connection that dropped without a word (a network partition, a failover) is
// seen within pingEvery + pingTimeout + the dial guard's grace.
const (
	MinReconnect = time.Second
	MaxReconnect = 30 * time.Second
	pingEvery    = 30 * time.Second
	pingTimeout  = 10 * time.Second
)

// AppName is the application_name of namespace/name's listening connection, at most 63 bytes (PostgreSQL's
// NAMEDATALEN − 1, which it would truncate to): `status` finds a run that listens by it in pg_stat_activity.
func AppName(namespace, name string) string {
	s := "jobsched listen " + namespace + "/" + name
	if len(s) > 63 {
		s = s[:63]
	}
	return s
}

// Listener is a run's LISTEN. Wake delivers at most one pending wake, with what caused it.
type Listener struct {
	Wake <-chan string

	wake    chan string
	channel string
	pl      *pq.Listener
	guard   *pgdial.Guard
	secrets []string
	log     zerolog.Logger
	poll    time.Duration // the poll meanwhile, for the warnings

	mu        sync.Mutex
	listening bool
	refused   bool
	stop      context.CancelFunc
	done      sync.WaitGroup
}

// Start opens the listening connection for dsn (the install's; nothing is contacted before Start) and LISTENs on
// channel in the background: a run polls every poll until the LISTEN is acknowledged. The only error is a DSN that
// does not parse (a configuration error). What happens later is logged on log: a LISTEN the server refuses (a hot
// standby), a connection lost and re-established.
func Start(dsn, channel, appName string, poll time.Duration, log zerolog.Logger) (*Listener, error) {
	cfg, err := pgdsn.Parse(dsn)
	if err != nil {
		return nil, err
	}
	sdsn, err := pgdsn.Session(dsn, cfg, rows.DefaultConnectTimeout, appName)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	wake := make(chan string, 1)
	l := &Listener{Wake: wake, wake: wake, channel: channel, guard: pgdial.New(), secrets: pgdsn.Secrets(dsn, cfg.Password),
		log: log.With().Str("channel", channel).Logger(), poll: poll, stop: cancel}
	l.pl = pq.NewDialListener(l.guard, sdsn, MinReconnect, MaxReconnect, l.event)
	l.done.Add(3)
	go l.listen()
	go l.drain()
	go l.check(ctx)
	return l, nil
}

// Listening says the LISTEN is acknowledged on a connection not lost since.
func (l *Listener) Listening() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.listening
}

// Close ends the LISTEN and closes its connection.
func (l *Listener) Close() {
	l.stop()
	_ = l.pl.Close()
	l.done.Wait()
}

func (l *Listener) signal(why string) {
	select {
	case l.wake <- why:
	default: // one pending wake is enough: the pass it starts reads every row there is
	}
}

func (l *Listener) set(listening bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.listening = listening && !l.refused
}

// listen sends the LISTEN once the connection is up (pq.Listener blocks until then, and LISTENs again after each
// re-connect).
func (l *Listener) listen() {
	defer l.done.Done()
	err := l.pl.Listen(l.channel)
	var pqErr *pq.Error
	switch {
	case errors.As(err, &pqErr):
		l.refuse(pqErr)
	case err != nil: // closed before the connection was up
	default:
		l.set(true)
		l.log.Info().Msg("listening for notifications: a notification runs a pass at once")
		l.signal(WokeListener) // what was inserted between the last pass's read and the LISTEN
	}
}

// refuse is a LISTEN the server refused: it never will on this server (a hot standby refuses it during recovery),
// so the connection is closed and the run polls.
func (l *Listener) refuse(err *pq.Error) {
	l.mu.Lock()
	first := !l.refused
	l.refused, l.listening = true, false
	l.mu.Unlock()
	if !first {
		return
	}
	ev := l.log.Warn().Err(err).Dur("poll", l.poll)
	if err.Code == "25006" { // read_only_sql_transaction: "cannot execute LISTEN during recovery"
		ev.Msg("source.notify: the server refuses LISTEN: it is a hot standby (a read replica). Point the DSN at the " +
			"primary (a notification on the primary never reaches a replica); until then every pass is a poll")
	} else {
		ev.Msg("source.notify: the server refuses LISTEN. Connect to PostgreSQL itself or a pooler in session mode " +
			"(a pooler in transaction mode does not keep a LISTEN); until then every pass is a poll")
	}
	go func() { _ = l.pl.Close() }()
}

// event is pq.Listener's report of its connection.
func (l *Listener) event(ev pq.ListenerEventType, err error) {
	err = pgdsn.Redact(err, l.secrets)
	switch ev {
	case pq.ListenerEventDisconnected:
		l.set(false)
		l.log.Warn().Err(err).Dur("poll", l.poll).Msg("the listening connection is lost: polling until it is back")
		l.signal(WokeListener)
	case pq.ListenerEventReconnected:
		l.set(true)
		l.log.Info().Msg("listening again: a pass reads what a notification may have missed")
		// pq.Listener sends a nil notification next: drain wakes the run.
	case pq.ListenerEventConnectionAttemptFailed:
		var pqErr *pq.Error
		if errors.As(err, &pqErr) && pqErr.Code == "25006" {
			l.refuse(pqErr)
			return
		}
		l.log.Warn().Err(err).Dur("poll", l.poll).Msg("cannot connect to listen: trying again with a backoff, polling meanwhile")
	}
}

// drain reads every notification as it comes (the server queues what a listener does not read, and a full queue
// fails the writers' NOTIFY), keeping only that one came. The payload is not looked at.
func (l *Listener) drain() {
	defer l.done.Done()
	for n := range l.pl.NotificationChannel() {
		if n == nil { // re-connected: notifications may have been missed
			l.signal(WokeListener)
			continue
		}
		l.signal(WokeNotify)
	}
}

// check pings the listening connection every pingEvery: one that does not answer within pingTimeout is aborted
// (the dial guard), which pq.Listener reports as lost and re-establishes.
func (l *Listener) check(ctx context.Context) {
	defer l.done.Done()
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !l.Listening() {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, pingTimeout)
		stop := l.guard.Watch(pctx)
		err := l.pl.Ping()
		stop()
		cancel()
		if err != nil && ctx.Err() == nil {
			l.log.Debug().Err(pgdsn.Redact(err, l.secrets)).Msg("the listening connection does not answer")
		}
	}
}

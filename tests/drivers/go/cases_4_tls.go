package main

// TLS with the certificates run.py made for the run (SHOAL_TEST_SSLROOTCERT and the others of its
// TestPki.env()): verify-full, SCRAM with channel binding, a client certificate, a wrong CA.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// tlsConfig is the libpq-environment configuration with these keyword/value settings on top, for
// a connection pgx makes only over TLS, to a server whose certificate the run's CA signed for the
// name localhost.
func (t *T) tlsConfig(settings string) *pgx.ConnConfig {
	base := fmt.Sprintf("host=localhost sslmode=verify-full sslrootcert='%s'", os.Getenv("SHOAL_TEST_SSLROOTCERT"))
	cfg, err := pgx.ParseConfig(base + " " + settings)
	must(err, "pgx.ParseConfig")
	return cfg
}

func (t *T) connectConfig(cfg *pgx.ConnConfig) *pgx.Conn {
	c, err := pgx.ConnectConfig(t.ctx, cfg)
	must(err, "connect")
	t.onClose(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	return c
}

// checkEncrypted: the client and the server both say the connection is TLS, and data larger than
// a TLS record (16 KiB) goes both ways intact.
func (t *T) checkEncrypted(c *pgx.Conn) {
	conn, ok := c.PgConn().Conn().(*tls.Conn)
	if !ok {
		fail("the connection is a %T, not a *tls.Conn", c.PgConn().Conn())
	}
	state := conn.ConnectionState()
	if !state.HandshakeComplete || (state.Version != tls.VersionTLS12 && state.Version != tls.VersionTLS13) {
		fail("TLS handshake complete %v, version %s", state.HandshakeComplete, tls.VersionName(state.Version))
	}
	eq(state.PeerCertificates[0].Subject.CommonName, "localhost", "server certificate CN")
	eq(t.str(c, "SHOW ssl"), "on", "SHOW ssl")
	blob := make([]byte, 200_000)
	_, _ = rand.Read(blob)
	var got []byte
	var n int64
	t.get(c, into(&got, &n), "SELECT $1::bytea, length($1::bytea)", blob)
	if !bytes.Equal(got, blob) || n != int64(len(blob)) {
		fail("a 200 kB bytea through TLS: got %d bytes (length %d), equal %v", len(got), n, bytes.Equal(got, blob))
	}
}

// createRole creates a role for the case, dropped when the case ends, after the connections the
// case opened later are closed.
func (t *T) createRole(create, name string) {
	admin := t.connect()
	t.exec(admin, create)
	t.onClose(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, _ = admin.Exec(ctx, "DROP ROLE IF EXISTS "+name)
	})
}

func tlsVerifyFull(t *T) {
	c := t.connectConfig(t.tlsConfig(""))
	t.checkEncrypted(c)
	eq(t.str(c, "SELECT current_user"), "postgres", "current_user")
}

func tlsScramChannelBinding(t *T) {
	// run.py's pg_hba.conf lets tls_scram in over TLS only, by SCRAM-SHA-256; channel_binding=
	// require makes pgx insist on SCRAM-SHA-256-PLUS, bound to the server's certificate.
	t.createRole("CREATE ROLE tls_scram LOGIN PASSWORD 'scram over tls'", "tls_scram")
	c := t.connectConfig(t.tlsConfig("user=tls_scram password='scram over tls' channel_binding=require"))
	t.checkEncrypted(c)
	eq(t.str(c, "SELECT current_user"), "tls_scram", "current_user")
	_, err := pgx.ConnectConfig(t.ctx, t.config(func(cfg *pgx.ConnConfig) {
		cfg.User, cfg.Password = "tls_scram", "scram over tls"
		cfg.TLSConfig, cfg.Fallbacks = nil, nil // sslmode=disable, whatever PGSSLMODE says
	}))
	pe := pgErr(err, "28000", "tls_scram without TLS, past a hostnossl reject line")
	if !strings.Contains(pe.Message, "pg_hba.conf rejects connection") {
		fail("without TLS: %s", pe.Message)
	}
}

func tlsClientCertificate(t *T) {
	// The cert method: the client certificate (CN=tls_cert, signed by the run's CA) is the login.
	t.createRole("CREATE ROLE tls_cert LOGIN", "tls_cert")
	c := t.connectConfig(t.tlsConfig(fmt.Sprintf("user=tls_cert sslcert='%s' sslkey='%s'",
		os.Getenv("SHOAL_TEST_SSLCERT"), os.Getenv("SHOAL_TEST_SSLKEY"))))
	t.checkEncrypted(c)
	eq(t.str(c, "SELECT current_user"), "tls_cert", "current_user")
	_, err := pgx.ConnectConfig(t.ctx, t.tlsConfig("user=tls_cert"))
	pe := pgErr(err, "28000", "tls_cert by the cert method without a certificate")
	if !strings.Contains(pe.Message, "requires a valid client certificate") {
		fail("without a certificate: %s", pe.Message)
	}
}

func tlsWrongCARejected(t *T) {
	cfg := t.tlsConfig(fmt.Sprintf("sslrootcert='%s'", os.Getenv("SHOAL_TEST_WRONG_SSLROOTCERT")))
	c, err := pgx.ConnectConfig(t.ctx, cfg)
	if err == nil {
		c.Close(t.ctx)
		fail("verify-full accepted a server the given CA did not sign")
	}
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		fail("got %T %v, want an x509.UnknownAuthorityError", err, err)
	}
}

func init() {
	addCase("tls_verify_full", tlsVerifyFull)
	addCase("tls_scram_channel_binding", tlsScramChannelBinding)
	addCase("tls_client_certificate", tlsClientCertificate)
	addCase("tls_wrong_ca_rejected", tlsWrongCARejected)
}

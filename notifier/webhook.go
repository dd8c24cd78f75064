package notifier

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// Defaults and bounds of a webhook attempt.
const (
	defaultWebhookMethod  = http.MethodPost
	defaultWebhookTimeout = 30 * time.Second
	userAgent             = "hotreload"
	redacted              = "xxxxx"

	// maxDrain bounds how much of a response body is read so that the
	// connection can be reused; a longer body costs a new connection.
	maxDrain = 64 << 10
	// maxExcerpt bounds the part of an error response quoted in the error.
	maxExcerpt = 400
	// maxTokenSize bounds the bearer token file, which is read at every call.
	maxTokenSize = 16 << 10
	// maxRedirects bounds the redirects followed in one attempt.
	maxRedirects = 10
	// minScrub is the shortest secret that is scrubbed from error text by
	// value; shorter ones would mangle the message more than they protect.
	minScrub = 4
)

// WebhookOptions configures a Webhook. A program that takes the options from
// its users checks them first, with ParseURL, CheckMethod, CheckStatusCode
// and ParseHeader, and says what is wrong in its own terms.
type WebhookOptions struct {
	URL                string        // http or https; userinfo = basic auth
	Method             string        // "" means POST; an HTTP token
	StatusCodes        []string      // each "200" or a class "2xx", or several joined by commas; empty means ["200"]
	Timeout            time.Duration // per attempt; 0 means 30s; negative is an error
	Headers            []string      // "Name: value"
	BearerTokenFile    string        // read at every call (rotated tokens work)
	CAFile             string        // PEM, added to the system pool
	CertFile, KeyFile  string        // client certificate; both or neither
	InsecureSkipVerify bool          // do not verify the server's certificate
}

// Webhook reloads an application by calling one URL, for example
// Prometheus's /-/reload. It is a Target: Notify makes one HTTP request and
// succeeds only when the status code is one of the wanted ones; retrying is
// up to the caller. A Webhook is safe for concurrent use.
//
// Each attempt is bounded by the timeout. Redirects are followed, up to 10,
// as long as they stay on the same scheme, host and port, and keep the
// method. Any other redirect is a failed attempt that names the new
// location: one that would turn a POST into a GET (301, 302 and 303 do)
// would not reach the app as a reload, and one elsewhere would carry the
// credentials and headers there.
//
// Name, and every error that Notify returns, carries no credential: the URL's
// password and query values are redacted, and header values and the bearer
// token are never printed.
type Webhook struct {
	name      string        // the redacted URL
	op        string        // method and name, the context of every Notify error
	method    string        // the HTTP method
	url       *url.URL      // the URL without userinfo
	user      *url.Userinfo // basic auth, or nil
	header    http.Header   // Headers, without Host
	host      string        // a Host header, or ""
	tokenFile string        // BearerTokenFile, or ""
	match     func(code int) bool
	want      string // the wanted status codes, for messages
	timeout   time.Duration
	secrets   []string // values to scrub from error text
	client    *http.Client
}

var _ Target = (*Webhook)(nil)

// NewWebhook checks opts and returns a Webhook. Each problem is reported in
// one line, such as `method "PO ST": not a valid HTTP method`.
//
// The CA, certificate and key files must be readable now; the certificate
// and key are read again at every TLS handshake, so rotated ones are used
// on the next connection. The bearer token file may appear later (a
// projected token): it is read at every call.
func NewWebhook(opts WebhookOptions) (*Webhook, error) {
	u, err := ParseURL(opts.URL)
	if err != nil {
		if shown := RedactURL(opts.URL); shown != "" || opts.URL == "" {
			return nil, fmt.Errorf("URL %q: %w", shown, err)
		}
		return nil, fmt.Errorf("URL: %w", err)
	}
	w := &Webhook{
		name:      redactURL(u),
		user:      u.User,
		tokenFile: opts.BearerTokenFile,
		header:    make(http.Header),
	}
	if err := w.setRequest(opts); err != nil {
		return nil, err
	}
	if err := w.parseHeaders(opts.Headers); err != nil {
		return nil, err
	}
	if err := w.checkAuthorization(opts); err != nil {
		return nil, err
	}
	if opts.BearerTokenFile != "" {
		// The file may not exist yet, but a directory will never do.
		if fi, err := os.Stat(opts.BearerTokenFile); err == nil && fi.IsDir() {
			return nil, fmt.Errorf("bearer token file %s: is a directory", opts.BearerTokenFile)
		}
	}

	tlsConfig, err := newTLSConfig(opts, u.Scheme == "https")
	if err != nil {
		return nil, err
	}
	w.client = &http.Client{Transport: newTransport(tlsConfig), CheckRedirect: checkRedirect}

	w.url = new(url.URL)
	*w.url = *u
	w.url.User = nil
	w.secrets = secretsOf(u, w.header)
	return w, nil
}

// setRequest checks and sets what every attempt sends and expects: the
// method, the wanted status codes and the timeout.
func (w *Webhook) setRequest(opts WebhookOptions) error {
	w.method = opts.Method
	if w.method == "" {
		w.method = defaultWebhookMethod
	}
	if err := CheckMethod(w.method); err != nil {
		return fmt.Errorf("method %q: %w", opts.Method, err)
	}
	w.op = w.method + " " + w.name

	var err error
	if w.match, w.want, err = parseStatusCodes(opts.StatusCodes); err != nil {
		return err
	}

	switch {
	case opts.Timeout < 0:
		return fmt.Errorf("timeout %s: must not be negative", opts.Timeout)
	case opts.Timeout == 0:
		w.timeout = defaultWebhookTimeout
	default:
		w.timeout = opts.Timeout
	}
	return nil
}

// secretsOf returns the values that must never reach an error message, even
// if the app echoes them back in its response body: the URL's password and
// query values, and the headers' values with the credentials inside
// Authorization ones.
func secretsOf(u *url.URL, header http.Header) []string {
	var secrets []string
	if p, ok := u.User.Password(); ok {
		basic := base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + p))
		secrets = append(secrets, basic, p, url.QueryEscape(p), url.PathEscape(p))
	}
	for _, vs := range u.Query() {
		secrets = append(secrets, vs...)
	}
	for _, kv := range strings.Split(u.RawQuery, "&") {
		if _, v, ok := strings.Cut(kv, "="); ok {
			secrets = append(secrets, v)
		}
	}
	for name, vs := range header {
		secrets = append(secrets, vs...)
		if name == "Authorization" || name == "Proxy-Authorization" {
			for _, v := range vs {
				secrets = append(secrets, credentialParts(v)...)
			}
		}
	}
	return secrets
}

// credentialParts returns the parts of an Authorization value that an app
// may echo on their own: the credentials after the scheme ("Bearer T"
// gives T) and, for Basic, the decoded "user:password" and the password.
func credentialParts(value string) []string {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(value), " ")
	if !ok {
		return nil
	}
	cred = strings.TrimSpace(cred)
	parts := []string{cred}
	if strings.EqualFold(scheme, "Basic") {
		if b, err := base64.StdEncoding.DecodeString(cred); err == nil {
			parts = append(parts, string(b))
			if _, p, ok := strings.Cut(string(b), ":"); ok {
				parts = append(parts, p, url.QueryEscape(p), url.PathEscape(p))
			}
		}
	}
	return parts
}

// ParseURL parses a webhook URL and checks that it can be called: http or
// https, with an ASCII host and a port from 1 to 65535, and without a
// fragment. Its errors never quote the
// URL, which may hold a password: show it with RedactURL.
func ParseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	// A password with an unescaped / ? or # ends the authority early: the
	// URL does not parse ("invalid port" quoting the password), or parses
	// with the rest of the password and an @ in its path, query or
	// fragment. The parser's text quotes it, so it is not used.
	if err != nil || strings.Contains(u.Opaque+u.Path+u.RawQuery+u.Fragment, "@") {
		return nil, errors.New("not a valid URL; percent-encode / ? # % @ and spaces in its user and password (%2F %3F %23 %25 %40 %20)")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("scheme must be http or https")
	case u.Host == "":
		return nil, errors.New("no host")
	case strings.Contains(raw, "#"):
		return nil, errors.New("must not have a fragment (#...)")
	case strings.ContainsFunc(u.Hostname(), func(r rune) bool { return r > unicode.MaxASCII }):
		// Go dials the name as written, and no resolver finds it.
		return nil, fmt.Errorf("host %q is not ASCII: give its ASCII form (punycode, xn--...)", u.Hostname())
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("port %s: must be from 1 to 65535", p)
		}
	}
	return u, nil
}

// RedactURL returns raw as it may be shown: with its password and every
// query value replaced by xxxxx. Of a URL that ParseURL refuses as not
// valid, where whatever follows the scheme may be part of a password, it
// returns the scheme only ("http://..."), or "" when there is none: then
// nothing of it may be shown.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err == nil && !strings.Contains(u.Opaque+u.Path+u.RawQuery+u.Fragment, "@") {
		return redactURL(u)
	}
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok || !isScheme(scheme) {
		return ""
	}
	return scheme + "://..."
}

// CheckMethod checks that method is an HTTP method (a token, RFC 9110).
func CheckMethod(method string) error {
	if !isToken(method) {
		return errors.New("not a valid HTTP method")
	}
	return nil
}

// ParseHeader splits a header given as "Name: value" and checks it. No
// error holds the value. On an error, name is the header's name if it may
// be shown, else "": without a colon, name and value cannot be told apart,
// and a name that is not a valid one may hold the value
// ("X-Api-Key=s3cret: x").
func ParseHeader(h string) (name, value string, err error) {
	name, value, ok := strings.Cut(h, ":")
	name = strings.TrimSpace(name)
	if !ok {
		return "", "", errors.New(`want "Name: value"; this one has no colon`)
	}
	if !isToken(name) {
		return "", "", errors.New("not a valid header name")
	}
	value = strings.TrimSpace(value)
	if strings.ContainsFunc(value, isControl) {
		return name, "", errors.New("value has a control character")
	}
	if http.CanonicalHeaderKey(name) == "Host" && value == "" {
		return name, "", errors.New("empty host")
	}
	return name, value, nil
}

// parseHeaders fills w.header and w.host from the Headers option.
func (w *Webhook) parseHeaders(headers []string) error {
	for _, h := range headers {
		name, value, err := ParseHeader(h)
		switch {
		case err != nil && name == "":
			return fmt.Errorf("header: %w (not shown, as it may hold a secret)", err)
		case err != nil:
			return fmt.Errorf("header %q: %w", name, err)
		}
		if http.CanonicalHeaderKey(name) == "Host" {
			w.host = value
			continue
		}
		w.header.Add(name, value)
	}
	return nil
}

// checkAuthorization rejects more than one source of the Authorization
// header, since one would silently replace the other.
func (w *Webhook) checkAuthorization(opts WebhookOptions) error {
	_, header := w.header["Authorization"]
	switch {
	case header && opts.BearerTokenFile != "":
		return errors.New(`header "Authorization" and the bearer token file both set Authorization: use one`)
	case header && w.user != nil:
		return errors.New(`header "Authorization" and the user in the URL both set Authorization: use one`)
	case w.user != nil && opts.BearerTokenFile != "":
		return errors.New("the bearer token file and the user in the URL both set Authorization: use one")
	}
	return nil
}

// newTLSConfig builds the client's TLS configuration: the system roots (for an
// https URL) plus CAFile, and a client certificate read at every
// handshake.
func newTLSConfig(opts WebhookOptions, https bool) (*tls.Config, error) {
	var pool *x509.CertPool // nil: the system's, for an http URL that redirects to https
	if https || opts.CAFile != "" {
		pool = rootPool()
	}
	if opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file %s: %w", opts.CAFile, err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no certificates found", opts.CAFile)
		}
	}
	cfg := &tls.Config{
		RootCAs:            pool,
		InsecureSkipVerify: opts.InsecureSkipVerify, //nolint:gosec // asked for by InsecureSkipVerify
		MinVersion:         tls.VersionTLS12,
	}
	switch {
	case (opts.CertFile == "") != (opts.KeyFile == ""):
		return nil, errors.New("client certificate and key files go together")
	case opts.CertFile != "":
		certFile, keyFile := opts.CertFile, opts.KeyFile
		if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
			return nil, fmt.Errorf("client certificate %s with key %s: %w", certFile, keyFile, err)
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return nil, fmt.Errorf("load client certificate: %w", err)
			}
			return &cert, nil
		}
	}
	return cfg, nil
}

// rootPool returns the system's roots or, where the system has none (an
// image built from scratch or distroless/static without a CA bundle), the
// Mozilla roots that x/crypto bundles. They are parsed here, for an https
// target only, rather than at every start by importing x509roots/fallback:
// that costs about 0.7 MB of heap that an http-only sidecar never needs.
func rootPool() *x509.CertPool {
	if pool, err := x509.SystemCertPool(); err == nil && !pool.Equal(x509.NewCertPool()) {
		return pool
	}
	pool := x509.NewCertPool()
	for root := range bundle.Roots() {
		cert, err := x509.ParseCertificate(root.Certificate)
		if err != nil {
			continue // the bundle is tested upstream; skip rather than fail a reload
		}
		if root.Constraint != nil {
			pool.AddCertWithConstraint(cert, root.Constraint)
		} else {
			pool.AddCert(cert)
		}
	}
	return pool
}

// newTransport returns a transport like http.DefaultTransport, of our own so
// that its TLS configuration and idle connections are ours alone.
func newTransport(tlsConfig *tls.Config) *http.Transport {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		TLSClientConfig:       tlsConfig,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          10,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// checkRedirect follows up to maxRedirects redirects that stay on the same
// scheme, host and port and keep the method. A reload endpoint has no
// business sending its caller elsewhere, and the request carries its
// credentials: Go sends custom headers on to any host, and basic auth to
// another port of the same one.
func checkRedirect(req *http.Request, via []*http.Request) error {
	first := via[0]
	switch {
	case len(via) >= maxRedirects:
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	case origin(req.URL) != origin(first.URL):
		return &RedirectError{fmt.Sprintf("redirected to %s: refusing to follow to another scheme, host or port, which would get the credentials", redactURL(req.URL))}
	case req.Method != first.Method:
		return &RedirectError{fmt.Sprintf("redirected to %s, which would turn %s into %s", redactURL(req.URL), first.Method, req.Method)}
	}
	return nil
}

// origin returns the scheme, host and port of u, with the scheme's default
// port when it has none.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// RedirectError is a failed attempt that the app answered with a redirect
// that was not followed: the URL is probably not the reload endpoint.
type RedirectError struct{ msg string }

func (e *RedirectError) Error() string { return e.msg }

// Name returns the URL with its password and every query value replaced by
// xxxxx: the name of the target in logs and metric labels.
func (w *Webhook) Name() string { return w.name }

// Notify makes one request and returns nil if the status code is a wanted
// one. A failed attempt is reported as "METHOD NAME: problem"; an unwanted
// status comes with an excerpt of the response body, where apps such as
// Prometheus say what is wrong with the configuration.
func (w *Webhook) Notify(ctx context.Context) error {
	attempt, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, token, err := w.newRequest(attempt)
	if err != nil {
		return w.fail(err.Error(), err)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return w.transportError(ctx, attempt, err, token)
	}
	defer resp.Body.Close()
	head := make([]byte, 4<<10)
	n, _ := io.ReadFull(resp.Body, head)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	if w.match(resp.StatusCode) {
		return nil
	}
	body := w.scrub(excerpt(head[:n]), token)
	msg := fmt.Sprintf("status %d, want %s", resp.StatusCode, w.want)
	if body != "" {
		msg += ": " + body
	}
	se := &StatusError{Code: resp.StatusCode, Body: body}
	// The reason a view reports names the request and the status, never
	// the answer, which may quote the configuration.
	reason := fmt.Sprintf("%s: status %d", w.op, resp.StatusCode)
	if errors.Is(se, ErrRefused) {
		return Refused(w.fail(msg, se, token), reason)
	}
	return WithReason(w.fail(msg, se, token), reason)
}

// StatusError is a failed attempt that the app answered with a status code
// that is not a wanted one. Body is the beginning and end of its response,
// in one line, with every credential scrubbed, as in the attempt's error.
// It is an ErrRefused unless the code says to come back later: 408, 425,
// 429, 502, 503 and 504 (an app that is starting, a proxy in front of one).
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string { return fmt.Sprintf("status %d", e.Code) }

// Unwrap returns ErrRefused for a code that refuses the reload.
func (e *StatusError) Unwrap() error {
	switch e.Code {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return nil
	}
	return ErrRefused
}

// newRequest builds the request of one attempt, reading the bearer token,
// which it also returns.
func (w *Webhook) newRequest(ctx context.Context) (req *http.Request, token string, err error) {
	req, err = http.NewRequestWithContext(ctx, w.method, w.url.String(), http.NoBody)
	if err != nil {
		return nil, "", fmt.Errorf("build request: %w", err)
	}
	for name, values := range w.header {
		req.Header[name] = append([]string(nil), values...)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", userAgent)
	}
	if w.host != "" {
		req.Host = w.host
	}
	if w.user != nil {
		p, _ := w.user.Password()
		req.SetBasicAuth(w.user.Username(), p)
	}
	if w.tokenFile != "" {
		if token, err = readToken(w.tokenFile); err != nil {
			return nil, "", err
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req, token, nil
}

// readToken reads a bearer token file, which must hold one non-empty line.
func readToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("read bearer token: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenSize+1))
	if err != nil {
		return "", fmt.Errorf("read bearer token: %w", err)
	}
	if len(b) > maxTokenSize {
		return "", fmt.Errorf("bearer token file %s: larger than %d bytes", path, maxTokenSize)
	}
	token := strings.TrimSpace(string(b))
	switch {
	case token == "":
		return "", fmt.Errorf("bearer token file %s: empty", path)
	case strings.ContainsFunc(token, isControl):
		return "", fmt.Errorf("bearer token file %s: more than one line, or a control character", path)
	}
	return token, nil
}

// transportError turns an error from the client into a short message. The
// client's *url.Error quotes the URL with its query, so only its cause is
// kept.
func (w *Webhook) transportError(parent, attempt context.Context, err error, token string) error {
	fail := func(msg string, cause error) error { return w.fail(msg, cause, token) }
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	var unknownCA x509.UnknownAuthorityError
	var certErr *tls.CertificateVerificationError
	switch {
	case parent.Err() != nil:
		return fail(context.Cause(parent).Error(), context.Cause(parent))
	case errors.Is(attempt.Err(), context.DeadlineExceeded):
		return fail(fmt.Sprintf("timed out after %s", w.timeout), context.DeadlineExceeded)
	case isConnRefused(err):
		return fail("connection refused", err)
	case isConnReset(err):
		return fail("connection reset by the app", err)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return fail("connection closed by the app before a response", err)
	case errors.As(err, &unknownCA):
		return fail("TLS: certificate signed by an unknown authority", err)
	case errors.As(err, &certErr):
		return fail("TLS: "+certErr.Err.Error(), err)
	}
	return fail(err.Error(), err)
}

// fail returns the error of a failed attempt: w.op, then msg with every
// known secret, and the extra ones, scrubbed out. cause, if not nil, is what
// errors.Is and errors.As see; its text is not used.
func (w *Webhook) fail(msg string, cause error, extra ...string) error {
	return &attemptError{msg: w.op + ": " + w.scrub(msg, extra...), cause: cause}
}

// scrub returns msg with every known secret, and the extra ones, replaced by
// xxxxx.
func (w *Webhook) scrub(msg string, extra ...string) string {
	secrets := slices.Concat(extra, w.secrets)
	// Longest first, so that a secret inside another goes with it.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, s := range secrets {
		if len(s) >= minScrub {
			msg = strings.ReplaceAll(msg, s, redacted)
		}
	}
	return msg
}

// attemptError is a failed attempt. Its message is built from the redacted
// name only; the cause is kept for errors.Is and errors.As.
type attemptError struct {
	msg   string
	cause error
}

func (e *attemptError) Error() string { return e.msg }
func (e *attemptError) Unwrap() error { return e.cause }

// excerpt quotes an error response in one line: its non-empty lines joined
// by spaces, without control characters or invalid UTF-8. A longer one keeps
// its beginning and its end, where Go programs such as Prometheus put the
// cause ("...: yaml: unmarshal errors: line 16: field scrape_intervall not
// found"), and drops the middle.
func excerpt(body []byte) string {
	var lines []string
	for l := range strings.Lines(string(body)) {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	text := strings.ToValidUTF8(strings.Join(lines, " "), "")
	text = strings.Map(func(r rune) rune {
		if isControl(r) {
			return -1
		}
		return r
	}, text)
	text = strings.TrimSpace(text)
	if len(text) <= maxExcerpt {
		return text
	}
	const gap = " ... "
	head := maxExcerpt / 4
	for head > 0 && !isRuneStart(text[head]) {
		head--
	}
	tail := len(text) - (maxExcerpt - maxExcerpt/4 - len(gap))
	for tail < len(text) && !isRuneStart(text[tail]) {
		tail++
	}
	return text[:head] + gap + text[tail:]
}

// isConnRefused reports that nothing listens at the address: the app is
// not up yet.
func isConnRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// isConnReset reports that the app dropped the connection.
func isConnReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// isControl reports a C0 or C1 control character or DEL.
func isControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r < 0xa0) }

// isToken reports whether s is an HTTP token (RFC 9110, 5.6.2), as a method
// or a header name must be.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// redactURL returns u as a string with the password and every non-empty
// query value replaced by xxxxx. Query keys and their order are kept.
func redactURL(u *url.URL) string {
	r := *u
	if r.User != nil {
		if _, ok := r.User.Password(); ok {
			r.User = url.UserPassword(r.User.Username(), redacted)
		}
	}
	if r.RawQuery != "" {
		parts := strings.Split(r.RawQuery, "&")
		for i, p := range parts {
			if k, v, ok := strings.Cut(p, "="); ok && v != "" {
				parts[i] = k + "=" + redacted
			}
		}
		r.RawQuery = strings.Join(parts, "&")
	}
	return r.String()
}

// isScheme reports whether s is a URL scheme (RFC 3986, 3.1).
func isScheme(s string) bool {
	for i, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

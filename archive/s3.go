package archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/internal/secretfile"
)

// S3Config configures the S3 backend. Credentials come from
// CredentialsFile (the AWS shared-credentials format, profile "default")
// or, when it is empty, from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY:
// never from a request.
type S3Config struct {
	Endpoint        string // URL: https://s3.eu-west-1.amazonaws.com, http://minio:9000
	Bucket          string
	Region          string // "" = us-east-1
	Prefix          string // object names start with it ("" or ending in "/")
	CredentialsFile string
	// VirtualHosted addresses the bucket as a host name (bucket.host)
	// instead of in the path (host/bucket, the default: MinIO, Ceph RGW
	// and versitygw need it; AWS takes both).
	VirtualHosted bool
	SpoolDir      string // local directory for the streamed spool files
	// MaxBytes is the largest object Get downloads (<= 0: no cap besides
	// the object's recorded size): the supervisor passes the smaller of
	// the largest archive it ever writes and the archive bytes one caller
	// may keep, so an object planted in the bucket (by another writer, or
	// under a bucket an admin switched to) can never fill the spool
	// directory's file system.
	MaxBytes int64
	// Timeout bounds one transfer (put or get); metadata calls get
	// MetaTimeout. S3 slow or down costs at most this much, never a request.
	Timeout     time.Duration
	MetaTimeout time.Duration
}

// S3 keeps archives in an S3 bucket: <prefix>u<uid>/<name>.tar, with the
// sha256 in the object's x-amz-meta-sha256. Requests use path-style
// addressing and SigV4 against the configured endpoint, so AWS, MinIO, Ceph
// RGW and any S3 API work alike with no extra switch.
//
// Put spools the archive to a local file (hashing it on the way), then
// uploads it with its size and sha256: S3 makes an object visible only
// once its upload completed, so an interrupted upload leaves the earlier
// archive, never a partial one. Get refuses an object whose recorded size
// is over MaxBytes before downloading a byte, downloads at most one byte
// more than that size to a spool file, verifies size and sha256, then
// hands it out.
type S3 struct {
	cfg     S3Config
	client  *minio.Client
	secrets []string // scrubbed from every error
}

// OpenS3 checks cfg and builds the client. It does not contact the
// server: the supervisor starts while S3 is down (archives are best effort).
func OpenS3(ctx context.Context, cfg S3Config) (*S3, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.User != nil || u.RawQuery != "" {
		return nil, fmt.Errorf("archive: s3 endpoint %q: want http(s)://host[:port] with no path, user or query", cfg.Endpoint)
	}
	if cfg.Bucket == "" {
		return nil, errors.New("archive: s3 bucket is not set")
	}
	if cfg.Prefix != "" && (!strings.HasSuffix(cfg.Prefix, "/") || strings.HasPrefix(cfg.Prefix, "/") || strings.Contains(cfg.Prefix, "..")) {
		return nil, fmt.Errorf("archive: s3 prefix %q: want a relative prefix ending in /", cfg.Prefix)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Minute
	}
	if cfg.MetaTimeout <= 0 {
		cfg.MetaTimeout = 15 * time.Second
	}
	if !path.IsAbs(cfg.SpoolDir) {
		return nil, fmt.Errorf("archive: s3 spool directory %q is not absolute", cfg.SpoolDir)
	}
	if err := os.MkdirAll(cfg.SpoolDir, 0o700); err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	if old, _ := os.ReadDir(cfg.SpoolDir); len(old) > 0 {
		for _, e := range old {
			_ = os.Remove(path.Join(cfg.SpoolDir, e.Name())) // left by a crash
		}
	}
	v, err := readCredentials(cfg.CredentialsFile)
	if err != nil {
		return nil, err
	}
	// A fixed set: a file re-read later must not bring in a key that the
	// scrubber does not know.
	creds := credentials.NewStaticV4(v.AccessKeyID, v.SecretAccessKey, v.SessionToken)
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: cfg.MetaTimeout,
		IdleConnTimeout:       60 * time.Second,
		MaxIdleConnsPerHost:   4,
	}
	lookup := minio.BucketLookupPath
	if cfg.VirtualHosted {
		lookup = minio.BucketLookupDNS
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds: creds, Secure: u.Scheme == "https", Region: cfg.Region,
		BucketLookup: lookup, Transport: tr, MaxRetries: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("archive: s3 client: %w", err)
	}
	s := &S3{cfg: cfg, client: client}
	for _, sec := range []string{v.SecretAccessKey, v.AccessKeyID, v.SessionToken} {
		if sec != "" {
			s.secrets = append(s.secrets, sec)
		}
	}
	return s, nil
}

// ErrNoCredentials: the operator configured no S3 credentials (an
// ErrInvalid: choosing the s3 backend is refused until the operator does).
var ErrNoCredentials error = errdefs.New(errdefs.ErrInvalid,
	"no s3 credentials: the operator sets --s3-credentials-file (aws_access_key_id and aws_secret_access_key under [default]) or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; credentials are never accepted over the API", "", nil)

// readCredentials reads the operator's credentials: file (the AWS
// shared-credentials format, profile "default") or, when file is "", the
// environment. A missing file or key is ErrNoCredentials, and so is a file
// that is not a regular file owned by root or the service user with no
// access for group or others.
func readCredentials(file string) (credentials.Value, error) {
	var creds *credentials.Credentials
	if file != "" {
		// The API keys file's rule (package secretfile): the file holds
		// the secret every archive is signed with.
		f, err := secretfile.Open(file, "s3 credentials file", os.Geteuid())
		if err != nil {
			// Both wrapped: the cause (a missing, unreadable or
			// too open file) and the class the settings check
			// answers 400 with.
			return credentials.Value{}, fmt.Errorf("archive: %w: %w", err, ErrNoCredentials)
		}
		_ = f.Close()
		creds = credentials.NewFileAWSCredentials(file, "default")
	} else {
		creds = credentials.NewEnvAWS()
	}
	v, err := creds.GetWithContext(nil)
	if err != nil || v.AccessKeyID == "" || v.SecretAccessKey == "" {
		return credentials.Value{}, fmt.Errorf("archive: %w", ErrNoCredentials)
	}
	return v, nil
}

// HasCredentials reports whether the operator's credentials (file, or the
// environment when file is "") are set: only this, never their value.
func HasCredentials(file string) bool {
	_, err := readCredentials(file)
	return err == nil
}

// Backend is "s3".
func (s *S3) Backend() string { return BackendS3 }

func (s *S3) object(k Key) string { return s.cfg.Prefix + k.rel() }

// scrub turns err into an error that names no credential, classed
// ErrUnavailable unless it is one of this package's own.
func (s *S3) scrub(op string, k Key, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrChecksum) || errors.Is(err, ErrTooLarge) {
		return err
	}
	msg := err.Error()
	for _, sec := range s.secrets {
		msg = strings.ReplaceAll(msg, sec, "[redacted]")
	}
	return fmt.Errorf("archive: s3 %s %s: %s: %w", op, k.rel(), msg, ErrUnavailable)
}

// Put implements Store.
func (s *S3) Put(ctx context.Context, k Key, write WriteFunc) (Info, error) {
	if !k.Valid() {
		return Info{}, fmt.Errorf("archive: bad key %+v", k)
	}
	f, err := os.CreateTemp(s.cfg.SpoolDir, "put-*.tar")
	if err != nil {
		return Info{}, fmt.Errorf("archive: spool: %w", err)
	}
	defer func() { _ = os.Remove(f.Name()) }()
	defer f.Close()
	hw := newHashWriter(f)
	if _, err := write(hw); err != nil {
		return Info{}, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Info{}, fmt.Errorf("archive: spool: %w", err)
	}
	info := Info{Key: k, Size: hw.n, SHA256: hw.sum()}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	// 16 MiB parts, two at a time: the upload reads the spool file at
	// offsets, so memory stays at a few parts whatever the archive's size.
	up, err := s.client.PutObject(ctx, s.cfg.Bucket, s.object(k), f, info.Size, minio.PutObjectOptions{
		ContentType:  "application/x-tar",
		UserMetadata: map[string]string{"sha256": info.SHA256},
		PartSize:     16 << 20, NumThreads: 2,
	})
	if err != nil {
		return Info{}, s.scrub("put", k, err)
	}
	info.ModTime = up.LastModified
	if info.ModTime.IsZero() {
		info.ModTime = time.Now()
	}
	return info, nil
}

// Get implements Store. The download is pinned to the ETag read with the
// metadata, so an object replaced in between fails instead of mixing.
func (s *S3) Get(ctx context.Context, k Key) (*Reader, error) {
	if !k.Valid() {
		return nil, fmt.Errorf("archive: bad key %+v", k)
	}
	st, err := s.stat(ctx, k)
	if err != nil {
		return nil, err
	}
	if s.cfg.MaxBytes > 0 && st.Size > s.cfg.MaxBytes {
		return nil, fmt.Errorf("archive %s: %d bytes stored, over the %d bytes an archive may have: %w", k.rel(), st.Size, s.cfg.MaxBytes, ErrTooLarge)
	}
	f, err := os.CreateTemp(s.cfg.SpoolDir, "get-*.tar")
	if err != nil {
		return nil, fmt.Errorf("archive: spool: %w", err)
	}
	release := func() error { _ = f.Close(); return os.Remove(f.Name()) }
	tctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	opts := minio.GetObjectOptions{}
	if err := opts.SetMatchETag(st.ETag); err != nil {
		_ = release()
		return nil, s.scrub("get", k, err)
	}
	obj, err := s.client.GetObject(tctx, s.cfg.Bucket, s.object(k), opts)
	if err != nil {
		_ = release()
		return nil, s.scrub("get", k, err)
	}
	hw := newHashWriter(f)
	// One byte past the recorded size is enough to tell a body that does
	// not match it (verify below); a server that sends more is not read.
	_, err = io.Copy(hw, io.LimitReader(obj, st.Size+1))
	_ = obj.Close()
	if err != nil {
		_ = release()
		return nil, s.scrub("get", k, err)
	}
	if err := verify(k, st.Size, sha256Of(st), hw.n, hw.sum()); err != nil {
		_ = release()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		_ = release()
		return nil, fmt.Errorf("archive: spool: %w", err)
	}
	return &Reader{Info: Info{Key: k, Size: hw.n, SHA256: hw.sum(), ModTime: st.LastModified}, r: f, c: release}, nil
}

func (s *S3) stat(ctx context.Context, k Key) (minio.ObjectInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.MetaTimeout)
	defer cancel()
	st, err := s.client.StatObject(ctx, s.cfg.Bucket, s.object(k), minio.StatObjectOptions{})
	if err != nil {
		if minio.ToErrorResponse(err).StatusCode == http.StatusNotFound {
			return st, fmt.Errorf("archive %s: %w", k.rel(), ErrNotFound)
		}
		return st, s.scrub("stat", k, err)
	}
	return st, nil
}

// sha256Of reads the recorded sha256 from the object's metadata.
func sha256Of(st minio.ObjectInfo) string {
	for k, v := range st.UserMetadata {
		if strings.EqualFold(k, "sha256") {
			return strings.ToLower(v)
		}
	}
	return strings.ToLower(st.Metadata.Get("X-Amz-Meta-Sha256"))
}

// Touch implements Store: a server-side copy onto itself (metadata kept)
// renews LastModified, which retention counts from.
func (s *S3) Touch(ctx context.Context, k Key) error {
	st, err := s.stat(ctx, k)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	_, err = s.client.CopyObject(ctx,
		minio.CopyDestOptions{Bucket: s.cfg.Bucket, Object: s.object(k), ReplaceMetadata: true,
			UserMetadata: map[string]string{"sha256": sha256Of(st)}},
		minio.CopySrcOptions{Bucket: s.cfg.Bucket, Object: s.object(k), MatchETag: st.ETag})
	return s.scrub("touch", k, err)
}

// Delete implements Store.
func (s *S3) Delete(ctx context.Context, k Key) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.MetaTimeout)
	defer cancel()
	err := s.client.RemoveObject(ctx, s.cfg.Bucket, s.object(k), minio.RemoveObjectOptions{})
	if err != nil && minio.ToErrorResponse(err).StatusCode == http.StatusNotFound {
		return nil
	}
	return s.scrub("delete", k, err)
}

// List implements Store (sizes and times; the sha256 is read by Get).
func (s *S3) List(ctx context.Context, owner string) ([]Info, error) {
	prefix := s.cfg.Prefix
	if owner != "" {
		d, ok := ownerDir(owner)
		if !ok {
			return nil, fmt.Errorf("archive: list: bad owner %q", owner)
		}
		prefix += d + "/"
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	var out []Info
	for o := range s.client.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return out, s.scrub("list", Key{Owner: owner}, o.Err)
		}
		k, ok := parseRel(strings.TrimPrefix(o.Key, s.cfg.Prefix))
		if !ok {
			continue
		}
		out = append(out, Info{Key: k, Size: o.Size, ModTime: o.LastModified})
	}
	return out, nil
}

// Ping checks that the bucket answers (the health check's probe).
func (s *S3) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.MetaTimeout)
	defer cancel()
	ok, err := s.client.BucketExists(ctx, s.cfg.Bucket)
	if err == nil && !ok {
		err = fmt.Errorf("bucket %q does not exist", s.cfg.Bucket)
	}
	return s.scrub("ping", Key{}, err)
}

var _ Store = (*S3)(nil)

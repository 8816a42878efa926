package main

import (
	"errors"
	"flag"

	"github.com/sandboxd/sandboxd/client"
)

// connFlags are how a command reaches the supervisor: the Unix socket, or
// a TCP listener's URL with an API key (and a CA file for a private CA).
type connFlags struct {
	socket, url, keyFile, caFile, clientCert, clientKey string
	lookupEnv                                           func(string) (string, bool)
}

// addConnFlags registers --socket, --url, --api-key-file, --ca-file,
// --client-cert and --client-key on fs.
func addConnFlags(fs *flag.FlagSet, lookupEnv func(string) (string, bool)) *connFlags {
	c := &connFlags{lookupEnv: lookupEnv}
	env := func(k string) string { v, _ := lookupEnv(k); return v }
	fs.StringVar(&c.socket, "socket", defaultSocket(lookupEnv), "")
	fs.StringVar(&c.url, "url", env("SANDBOXD_URL"), "")
	fs.StringVar(&c.keyFile, "api-key-file", env("SANDBOXD_API_KEY_FILE"), "")
	fs.StringVar(&c.caFile, "ca-file", env("SANDBOXD_CA_FILE"), "")
	fs.StringVar(&c.clientCert, "client-cert", env("SANDBOXD_CLIENT_CERT"), "")
	fs.StringVar(&c.clientKey, "client-key", env("SANDBOXD_CLIENT_KEY"), "")
	return c
}

// client returns the client the flags name: --url (with the key from
// --api-key-file, else $SANDBOXD_API_KEY) or else the socket.
func (c *connFlags) client() (*client.Client, error) {
	if c.url == "" {
		if c.keyFile != "" || c.caFile != "" || c.clientCert != "" {
			return nil, errors.New("--api-key-file, --ca-file and --client-cert need --url (the socket needs no key)")
		}
		return client.New(c.socket), nil
	}
	key := ""
	if c.keyFile != "" {
		k, err := client.ReadKeyFile(c.keyFile)
		if err != nil {
			return nil, err
		}
		key = k
	} else if k, _ := c.lookupEnv("SANDBOXD_API_KEY"); k != "" {
		key = k
	}
	return client.NewRemote(client.Remote{URL: c.url, APIKey: key, CAFile: c.caFile, ClientCert: c.clientCert, ClientKey: c.clientKey})
}

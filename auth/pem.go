package auth

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// ParsePublicKeysPEM parses one or more PEM blocks into RSA and Ed25519
// public keys, for [JWTConfig]. Each block must be a "PUBLIC KEY" (PKIX),
// an "RSA PUBLIC KEY" (PKCS #1) or a "CERTIFICATE" whose key is RSA or
// Ed25519; anything else, including a private key, is an error. Text
// between blocks is ignored.
func ParsePublicKeysPEM(pemBytes []byte) (rsaKeys []*rsa.PublicKey, edKeys []ed25519.PublicKey, err error) {
	rest := pemBytes
	n := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		n++
		var key any
		switch block.Type {
		case "PUBLIC KEY":
			key, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			key, err = x509.ParsePKCS1PublicKey(block.Bytes)
		case "CERTIFICATE":
			var cert *x509.Certificate
			cert, err = x509.ParseCertificate(block.Bytes)
			if err == nil {
				key = cert.PublicKey
			}
		default:
			return nil, nil, fmt.Errorf("auth: parse PEM block %d: unsupported type %q", n, block.Type)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("auth: parse PEM block %d (%s): %w", n, block.Type, err)
		}
		switch k := key.(type) {
		case *rsa.PublicKey:
			rsaKeys = append(rsaKeys, k)
		case ed25519.PublicKey:
			edKeys = append(edKeys, k)
		default:
			return nil, nil, fmt.Errorf("auth: parse PEM block %d (%s): unsupported key type %T", n, block.Type, key)
		}
	}
	if n == 0 {
		return nil, nil, errors.New("auth: no PEM block found")
	}
	if bytes.Contains(rest, []byte("-----BEGIN")) {
		return nil, nil, errors.New("auth: malformed PEM block after the last one")
	}
	return rsaKeys, edKeys, nil
}

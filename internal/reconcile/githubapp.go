package reconcile

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// githubAppJWTLife is how long an App JWT is valid; GitHub accepts at most
// 10 minutes.
const githubAppJWTLife = 9 * time.Minute

// ParseRSAPrivateKey reads a GitHub App's private key, the PEM file GitHub
// generates (PKCS#1 "RSA PRIVATE KEY", or PKCS#8 "PRIVATE KEY").
func ParseRSAPrivateKey(pemKey []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(pemKey)
	if block == nil {
		return nil, errors.New("reconcile: github: the private key is not PEM")
	}
	if key, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return key, nil
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("reconcile: github: the private key is neither PKCS#1 nor PKCS#8: %w", err)
	}
	key, ok := parsed.(*rsa.PrivateKey)
	if !ok {
		return nil, errors.New("reconcile: github: the private key is not an RSA key")
	}
	return key, nil
}

// githubAppJWT returns the JWT that authenticates as the GitHub App appID:
// RS256, issued a minute in the past (GitHub's advice against clock drift),
// expiring githubAppJWTLife later.
func githubAppJWT(appID string, key *rsa.PrivateKey, now time.Time) (string, error) {
	header, err := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT"})
	if err != nil {
		return "", err
	}
	claims, err := json.Marshal(map[string]any{
		"iat": now.Add(-time.Minute).Unix(),
		"exp": now.Add(githubAppJWTLife).Unix(),
		"iss": appID,
	})
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	signed := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		return "", fmt.Errorf("sign the app JWT: %w", err)
	}
	return signed + "." + enc.EncodeToString(sig), nil
}

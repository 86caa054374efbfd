// Command oidc-provider is the tests' identity provider: zitadel/oidc's example OpenID Provider
// (login page, in-memory sessions, RS256 keys made at start) with a user directory read from a
// JSON file, a "groups" claim taken from that file at every token and userinfo request (so a
// group changed in the file shows at the next login), one web client whose access tokens are
// JWTs, and a settable access-token lifetime (negative: tokens that are already expired).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// directoryEntry is the part of a user entry this program reads itself; storage reads the rest.
type directoryEntry struct {
	Groups []string
}

type provider struct {
	*storage.Storage
	usersFile string
	tokenTTL  time.Duration
}

// groups reads the user's groups from the directory file now (nil when unreadable or unknown).
func (p *provider) groups(userID string) []string {
	data, err := os.ReadFile(p.usersFile)
	if err != nil {
		return nil
	}
	entries := map[string]directoryEntry{}
	if json.Unmarshal(data, &entries) != nil {
		return nil
	}
	return entries[userID].Groups
}

func wantsGroups(scopes []string) bool {
	for _, scope := range scopes {
		if scope == "groups" {
			return true
		}
	}
	return false
}

func (p *provider) addGroups(userinfo *oidc.UserInfo, userID string, scopes []string) {
	if wantsGroups(scopes) {
		groups := p.groups(userID)
		if groups == nil {
			groups = []string{}
		}
		userinfo.AppendClaims("groups", groups)
	}
}

func (p *provider) SetUserinfoFromRequest(ctx context.Context, userinfo *oidc.UserInfo, token op.IDTokenRequest, scopes []string) error {
	if err := p.Storage.SetUserinfoFromRequest(ctx, userinfo, token, scopes); err != nil {
		return err
	}
	p.addGroups(userinfo, token.GetSubject(), scopes)
	return nil
}

func (p *provider) SetUserinfoFromToken(ctx context.Context, userinfo *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := p.Storage.SetUserinfoFromToken(ctx, userinfo, tokenID, subject, origin); err != nil {
		return err
	}
	p.addGroups(userinfo, userinfo.Subject, []string{"groups"})
	return nil
}

func (p *provider) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	claims, err := p.Storage.GetPrivateClaimsFromScopes(ctx, userID, clientID, scopes)
	if err != nil || !wantsGroups(scopes) {
		return claims, err
	}
	if claims == nil {
		claims = map[string]any{}
	}
	groups := p.groups(userID)
	if groups == nil {
		groups = []string{}
	}
	claims["groups"] = groups
	return claims, nil
}

func (p *provider) expiry() time.Time { return time.Now().Add(p.tokenTTL) }

func (p *provider) CreateAccessToken(ctx context.Context, request op.TokenRequest) (string, time.Time, error) {
	id, _, err := p.Storage.CreateAccessToken(ctx, request)
	return id, p.expiry(), err
}

func (p *provider) CreateAccessAndRefreshTokens(ctx context.Context, request op.TokenRequest, current string) (string, string, time.Time, error) {
	id, refresh, _, err := p.Storage.CreateAccessAndRefreshTokens(ctx, request, current)
	return id, refresh, p.expiry(), err
}

// jwtClient is a stored client whose access tokens are JWTs (the gateway verifies them offline).
type jwtClient struct{ op.Client }

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }

func (p *provider) GetClientByClientID(ctx context.Context, clientID string) (op.Client, error) {
	client, err := p.Storage.GetClientByClientID(ctx, clientID)
	if err != nil {
		return nil, err
	}
	return jwtClient{client}, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:9998", "address to serve on")
	issuer := flag.String("issuer", "http://127.0.0.1:9998/", "issuer URL (as clients reach it)")
	usersFile := flag.String("users", "", "JSON user directory: {id: {ID, Username, Password, Email, EmailVerified, FirstName, LastName, Groups}}")
	clientID := flag.String("client-id", "portal", "the web client's id")
	clientSecret := flag.String("client-secret", "portal-secret", "the web client's secret")
	redirects := flag.String("redirect-uris", "", "comma-separated redirect URIs of the web client")
	tokenTTL := flag.Duration("access-token-ttl", 5*time.Minute, "access token lifetime (negative: issued expired)")
	flag.Parse()

	users, err := storage.StoreFromFile(*usersFile)
	if err != nil {
		slog.Error("cannot read the user directory", "error", err)
		os.Exit(1)
	}
	storage.RegisterClients(storage.WebClient(*clientID, *clientSecret, strings.Split(*redirects, ",")...))
	p := &provider{Storage: storage.NewStorage(users), usersFile: *usersFile, tokenTTL: *tokenTTL}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	router := exampleop.SetupServer(*issuer, p, logger, false)
	server := &http.Server{Addr: *listen, Handler: router}
	slog.Info("serving", "issuer", *issuer)
	if err := server.ListenAndServe(); err != http.ErrServerClosed {
		slog.Error("server stopped", "error", err)
		os.Exit(1)
	}
}

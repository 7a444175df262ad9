package auth_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/golang-jwt/jwt/v5"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/roompattern"
)

func ExampleNewJWT() {
	secret := []byte("an example secret of 32+ bytes!!")
	a, err := auth.NewJWT(auth.JWTConfig{
		HMACSecret: secret,
		Audience:   "corral",
	})
	if err != nil {
		log.Fatal(err)
	}

	// An application server issues tokens like this one.
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub":     "alice",
		"aud":     "corral",
		"rooms":   []string{"game:*", "lobby"},
		"publish": []string{"game:*"},
	}).SignedString(secret)
	if err != nil {
		log.Fatal(err)
	}

	id, err := a.Authenticate(context.Background(), token)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(id.GetUserId())
	fmt.Println(roompattern.Match(id.GetJoin(), "lobby"), roompattern.Match(id.GetPublish(), "lobby"))
	fmt.Println(roompattern.Match(id.GetPublish(), "game:7"))

	_, err = a.Authenticate(context.Background(), token+"x")
	fmt.Println(errors.Is(err, auth.ErrUnauthenticated), err)
	// Output:
	// alice
	// true false
	// true
	// true auth: unauthenticated: bad signature
}

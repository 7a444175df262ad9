// Package config declares every setting of corral's commands once: the
// fields of [Settings], whose struct tags give each its key (the flag
// name, the config file key, the CORRAL_* environment variable), the
// commands that have it, whether it is a command-line flag (the
// operational ones) or a file key and variable only, its group, default,
// unit and help. Everything else is generated from that one table by
// reflection: the flag sets and --help ([Usage]), the environment and
// file decoding ([Load], [Loaded.ApplyFile]), `corral config keys`
// ([PrintKeys]), the JSON Schema ([Schema]) and the key table of
// docs/CONFIG.md ([KeyTable]). The per-package configurations embed its
// structs (core.Config embeds [Core], edge.Config [Edge], hooks.Config
// [Hooks], server.Options [Node]), so no setting is copied by hand.
//
// Values mean one thing each: a [Limit] is a positive number or
// "unlimited", a [Rate] a positive rate or "unlimited", a [Window] a
// duration or "off"; none of them takes 0 as a stand-in.
//
// The package also reads the config file ([ReadFile], [Parse]): YAML
// whose top-level keys are the keys, plus "rooms" (the room classes,
// decoded and checked by package roomclass) and "version", decoded
// strictly, with every error located as "file:line: key.path: message".
//
// Concurrency: [Keys] and [Lookup] are safe for concurrent use (the
// table is built at init and never changed); a [Loaded] is not.
package config

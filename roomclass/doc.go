// Package roomclass is the one place a room's settings are looked up.
//
// A deployment declares room classes in its config file: an ordered list
// of {name, match, settings}, where a room takes the settings of the first
// class whose patterns (package roompattern) match its name, and of the
// default class (built from the server's settings, package config) when
// none does. Every
// concept that treats rooms differently (the door, signals, presence,
// history, the event log, limits) asks [Table.Lookup]; none keeps a
// pattern list of its own.
//
// A [Class] is immutable once in a [Table]; a reload builds a new Table
// and swaps it into the [Live] holder, so a lookup sees the old or the new
// classes, never a mix.
//
// The package decodes and checks the classes of a config file
// ([DecodeClasses]: strictly, an unknown key is an error, every error
// located as "file:line: key.path: message"); package config reads the
// file itself and its other keys.
package roomclass

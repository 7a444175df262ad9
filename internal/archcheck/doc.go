// Package archcheck holds no code: its test checks that the imports
// between the module's packages are exactly the arrows docs/ARCHITECTURE.md
// lists, so that the whiteboard of the house stays true as the house
// changes.
package archcheck

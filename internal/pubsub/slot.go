package pubsub

import "strings"

// Slots is how many hash slots a Redis Cluster has.
const Slots = 16384

// Slot returns the Redis Cluster hash slot of a key or shard channel:
// CRC16 (XMODEM) of its hash tag, the part between the first "{" and the
// next "}" when that part is not empty, else of the whole name, modulo
// 16384.
func Slot(name string) uint16 {
	if i := strings.IndexByte(name, '{'); i >= 0 {
		if j := strings.IndexByte(name[i+1:], '}'); j > 0 {
			name = name[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(name); i++ {
		crc ^= uint16(name[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % Slots
}

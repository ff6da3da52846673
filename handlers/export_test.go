package handlers

import "time"

// Tests see topic changes within a tenth of a second.
func init() {
	liveTopicTick = 25 * time.Millisecond
	liveTopicPoll = 50 * time.Millisecond
}

package handlers

import "time"

// Tests see topic changes within a tenth of a second.
func init() {
	liveTopicPoll = 50 * time.Millisecond
}

// LiveStatsTrail is liveStatsTrail, for the stream tests.
const LiveStatsTrail = liveStatsTrail

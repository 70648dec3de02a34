package chat

import (
	"fmt"
	"strings"
	"time"
)

// strftime formats t as Python's time.strftime does in the C locale, for
// the directives chat templates use: %Y %y %m %d %e %j %H %I %M %S %p
// %a %A %b %B %h %Z %z %% (and %F, %T, %D, %R). Any other directive is
// written as it is, as Python leaves an unknown one.
// strftimeLayouts are the directives that are a Go time layout.
var strftimeLayouts = map[byte]string{
	'p': "PM", 'a': "Mon", 'A': "Monday", 'b': "Jan", 'h': "Jan", 'B': "January",
	'Z': "MST", 'z': "-0700", 'F': "2006-01-02", 'T': "15:04:05", 'D': "01/02/06", 'R': "15:04",
}

func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		switch d := format[i]; d {
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			fmt.Fprintf(&b, "%02d", (t.Hour()+11)%12+1)
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case '%':
			b.WriteByte('%')
		default:
			if layout, ok := strftimeLayouts[d]; ok {
				b.WriteString(t.Format(layout))
				continue
			}
			b.WriteByte('%')
			b.WriteByte(d)
		}
	}
	return b.String()
}

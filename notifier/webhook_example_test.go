package notifier_test

import (
	"fmt"

	"github.com/hotreload/hotreload/notifier"
)

// The name of a webhook, used in logs and metric labels, shows neither the
// password nor the values of the query.
func ExampleWebhook_Name() {
	w, err := notifier.NewWebhook(notifier.WebhookOptions{
		URL: "http://admin:s3cret@127.0.0.1:9090/-/reload?token=abc123&verbose",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(w.Name())
	// Output: http://admin:xxxxx@127.0.0.1:9090/-/reload?token=xxxxx&verbose
}

// Bad input is reported in one line that names the option.
func ExampleNewWebhook() {
	_, err := notifier.NewWebhook(notifier.WebhookOptions{
		URL:         "http://127.0.0.1:9090/-/reload",
		StatusCodes: []string{"2x5"},
	})
	fmt.Println(err)
	// Output: status code "2x5": want a code such as 200 or a class such as 2xx
}

// Package browsertest drives Debian's Chromium headless through chromedp for
// tests of the web dashboard: Start gives a test a browser with a fresh
// profile; Login, SubmitJob, WaitForJob and WaitForUtilization are the steps
// a person takes on the dashboard, and DashboardScenario strings them
// together. A step that fails saves a screenshot and fails the test with the
// page's text and console. A missing browser fails the test (it says to run
// scripts/ensure-chromium.sh), never skips it.
package browsertest

// Package browsertest drives Debian's Chromium headless through chromedp for
// tests of the web dashboard: Start gives a test a browser with a fresh
// profile and a 1,400 x 1,000 window; Login, SubmitJob, WaitForJob and
// WaitForUtilization are the steps a person takes on the dashboard, and
// DashboardScenario strings them together. ShootView keeps a screenshot of
// the window as a test artefact in $PRESCIENT_SCREENSHOTS (by default
// prescient-dashboard-screenshots in the temporary folder). A step that
// fails saves a screenshot and fails the test with the page's text and
// console. A missing browser fails the test (it says to run
// scripts/ensure-chromium.sh), never skips it.
package browsertest

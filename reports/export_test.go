package reports

// DocCoversEveryField is docCoversEveryField for the external tests
// (reports_test), which may import packages that import this one.
var DocCoversEveryField = docCoversEveryField

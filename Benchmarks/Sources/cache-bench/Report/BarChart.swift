import Foundation

/// A horizontal grouped bar chart written as a self-contained SVG file, readable at a glance:
/// one group of bars per workload, one bar per system, each labelled with its value.
struct BarChart {
    /// One bar: which series (system) it belongs to, its length and the text printed after it.
    struct Bar {
        var series: String
        var value: Double
        var text: String
    }

    /// One workload's bars.
    struct Group {
        var label: String
        var bars: [Bar]
    }

    /// How bar lengths are scaled.
    enum Scale {
        /// Each group's longest bar fills the width: throughputs that differ by orders of magnitude
        /// between workloads stay comparable within one.
        case perGroup
        /// One scale from 0 to the largest value of the chart (hit ratios).
        case shared
    }

    var title: String
    var subtitle: String
    var groups: [Group]
    var scale: Scale

    private static let palette = [
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
        "#17becf",
    ]

    /// The SVG document.
    var svg: String {
        let series = groups.flatMap { $0.bars.map(\.series) }.reduce(into: [String]()) { list, name in
            if !list.contains(name) { list.append(name) }
        }
        let color = Dictionary(
            uniqueKeysWithValues: series.enumerated().map { ($1, Self.palette[$0 % Self.palette.count]) })
        let width = 960.0
        let labelWidth = 230.0
        let barArea = 560.0
        let barHeight = 14.0
        let barGap = 3.0
        let groupGap = 14.0
        let legendRows = (series.count + 3) / 4
        var y = 66.0 + Double(legendRows) * 18.0
        var body: [String] = []
        let sharedMaximum = groups.flatMap { $0.bars.map(\.value) }.max() ?? 1
        for group in groups {
            let maximum = scale == .shared ? sharedMaximum : (group.bars.map(\.value).max() ?? 1)
            let groupHeight = Double(group.bars.count) * (barHeight + barGap)
            body.append(
                #"<text x="\#(labelWidth - 10)" y="\#(y + groupHeight / 2 + 4)" text-anchor="end" class="group">\#(escape(group.label))</text>"#
            )
            for bar in group.bars {
                let length = maximum > 0 ? max(1, barArea * bar.value / maximum) : 1
                body.append(
                    #"<rect x="\#(labelWidth)" y="\#(y)" width="\#(format(length, decimals: 1))" height="\#(barHeight)" fill="\#(color[bar.series]!)"><title>\#(escape(bar.series)): \#(escape(bar.text))</title></rect>"#
                )
                body.append(
                    #"<text x="\#(labelWidth + length + 5)" y="\#(y + barHeight - 3)" class="value">\#(escape(bar.text))</text>"#
                )
                y += barHeight + barGap
            }
            body.append(
                #"<line x1="\#(labelWidth - 200)" x2="\#(width - 10)" y1="\#(y + groupGap / 2 - barGap)" y2="\#(y + groupGap / 2 - barGap)" class="rule"/>"#
            )
            y += groupGap
        }
        var legend: [String] = []
        for (index, name) in series.enumerated() {
            let x = 20.0 + Double(index % 4) * 235.0
            let legendY = 60.0 + Double(index / 4) * 18.0
            legend.append(#"<rect x="\#(x)" y="\#(legendY - 10)" width="12" height="12" fill="\#(color[name]!)"/>"#)
            legend.append(#"<text x="\#(x + 17)" y="\#(legendY)" class="legend">\#(escape(name))</text>"#)
        }
        let height = y + 10
        return """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" viewBox="0 0 \(Int(width)) \(Int(height))" font-family="Helvetica, Arial, sans-serif">
            <style>
            .title { font-size: 16px; font-weight: bold; }
            .subtitle { font-size: 12px; fill: #555; }
            .group { font-size: 12px; }
            .value { font-size: 11px; fill: #222; }
            .legend { font-size: 12px; }
            .rule { stroke: #ddd; stroke-width: 1; }
            </style>
            <rect width="100%" height="100%" fill="white"/>
            <text x="20" y="22" class="title">\(escape(title))</text>
            <text x="20" y="38" class="subtitle">\(escape(subtitle))</text>
            \((legend + body).joined(separator: "\n"))
            </svg>

            """
    }

    private func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}

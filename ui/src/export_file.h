// The GUI's exports (chart images, SVGs, CSVs, screenshots) are written like every `--out` of
// the CLI: rendered into memory, then snip::write_file_atomic (a symbolic link is written
// through, a directory or device is refused, a failed write leaves the previous file intact).
#pragma once
#include <QPixmap>
#include <QSize>
#include <QString>
#include <functional>

class QPainter;

namespace snip::ui {

// Throws snip::Error naming the path and the cause.
void write_png_file(const QPixmap& pixmap, const QString& path);
void write_svg_file(const QSize& size, const QString& title, const std::function<void(QPainter&)>& render,
                    const QString& path);

}  // namespace snip::ui
